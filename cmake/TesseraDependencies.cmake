# Finds the Debian packages Tessera uses and wraps those without CMake
# configs in IMPORTED targets (see FACTS.md for why each is done this way).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
# Needs C enabled in project() (FACTS.md); gives CapnProto::capnp and
# capnp_generate_cpp.
find_package(CapnProto REQUIRED)
# UCX 1.13 (libucx-dev) ships a config: ucx::ucp, ucx::uct, ucx::ucs.
find_package(ucx REQUIRED)
# RocksDB 7.8 (librocksdb-dev) ships a config: RocksDB::rocksdb (static) and
# RocksDB::rocksdb-shared; the kv store links the shared one.
find_package(RocksDB REQUIRED)
# HMAC-SHA256 and random numbers for the cluster handshake (libssl-dev).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# CAF 0.17.6 ships no CMake config and no .pc file.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
add_library(caf::core UNKNOWN IMPORTED)
set_target_properties(caf::core PROPERTIES
  IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR}
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(caf::io UNKNOWN IMPORTED)
set_target_properties(caf::io PROPERTIES
  IMPORTED_LOCATION ${CAF_IO_LIBRARY}
  INTERFACE_LINK_LIBRARIES caf::core)

# xxHash: header + static library, no config.
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY NAMES xxhash libxxhash.a REQUIRED)
add_library(xxhash::xxhash UNKNOWN IMPORTED)
set_target_properties(xxhash::xxhash PROPERTIES
  IMPORTED_LOCATION ${XXHASH_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${XXHASH_INCLUDE_DIR})

pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(TOMLPLUSPLUS REQUIRED IMPORTED_TARGET tomlplusplus)
find_library(SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train REQUIRED)

# OpenBLAS (pthread flavour) for the GEMM comparison in the engine benchmark.
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread openblas REQUIRED)
find_library(OPENBLAS_LIBRARY openblas REQUIRED)
add_library(openblas::openblas UNKNOWN IMPORTED)
set_target_properties(openblas::openblas PROPERTIES
  IMPORTED_LOCATION ${OPENBLAS_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${OPENBLAS_INCLUDE_DIR})

# Boost 1.74 (libboost-dev): only the header-only Beast and Asio, for the HTTP
# server (actors/frontend). Boost::headers carries the include path.
find_package(Boost 1.74 REQUIRED)

if(TESSERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
