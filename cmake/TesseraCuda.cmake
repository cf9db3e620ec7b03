# TESSERA_CUDA=AUTO|ON|OFF. CUDA sources compile wherever nvcc exists; the
# rest of the project never needs it. nvcc is often not on PATH.
set(TESSERA_HAVE_CUDA OFF)
if(NOT TESSERA_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # 'native' fails without a GPU; build for the data-centre parts.
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 (Debian 12) knows no C++20 flag for nvcc and then refuses
    # any CUDA target of a C++20 project; nvcc >= 12 accepts -std=c++20.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION
       AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(TESSERA_HAVE_CUDA ON)
  elseif(TESSERA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TESSERA_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "Tessera CUDA backend: ${TESSERA_HAVE_CUDA}")
