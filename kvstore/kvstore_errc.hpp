#pragma once
/// @file
/// The kv store's error codes. Every error the kvstore library returns is a
/// caf::error with one of these codes and a message naming what was wrong
/// (the directory, the key, the field).

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace tessera::kvstore {

/// Error codes of the kvstore library (category "kvstore").
enum class kvstore_errc : uint8_t {
  /// The store directory could not be created or opened, or RocksDB
  /// refused to open it (locked by another process, corrupt MANIFEST).
  open_failed = 1,
  /// An option is out of range (zero capacity, a blob size of zero).
  bad_config,
  /// A block handed to put() is malformed: its payload size does not match
  /// its layout, its token count is out of range, or its checksum is wrong.
  bad_block,
  /// A block is larger than every tier that could hold it.
  too_large,
  /// A RocksDB call failed after the store was open (flush, write).
  io_error,
};

/// Returns the name of `x`, e.g. "open_failed".
const char* to_string(kvstore_errc x);

/// Makes a caf::error of category "kvstore" carrying `what`.
caf::error make_kvstore_error(kvstore_errc code, std::string what);

} // namespace tessera::kvstore

CAF_ERROR_CODE_ENUM(tessera::kvstore::kvstore_errc, "kvstore")
