# Finds required and optional dependencies and prints one found / not-found line per optional part,
# each with the Debian package that provides it. Sets RINGMASTER_HAVE_<PART> for the rest of the build.

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(simdjson REQUIRED)  # libsimdjson-dev: the telemetry decoder's fast path
find_package(ZLIB REQUIRED)      # zlib1g-dev: checkpoint checksums (CRC-32)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(CBLAS_INCLUDE_DIR openblas_config.h
  PATH_SUFFIXES openblas-pthread openblas x86_64-linux-gnu/openblas-pthread aarch64-linux-gnu/openblas-pthread
  REQUIRED)
# oneDNN (libdnnl-dev): the host GEMM in the modes where it beats OpenBLAS (engine/tensor/host_gemm.h),
# and the OpenMP runtime it runs its threads on, whose thread setting the engine sets.
find_library(DNNL_LIBRARY dnnl REQUIRED)
find_path(DNNL_INCLUDE_DIR dnnl.h REQUIRED)
find_library(GOMP_LIBRARY NAMES libgomp.so.1 gomp REQUIRED)

# The SONAME of a shared library: the name the engine passes to dlopen (objdump -p), or the file's
# name when it has none.
function(ringmaster_soname out library)
  execute_process(COMMAND ${CMAKE_OBJDUMP} -p ${library} OUTPUT_VARIABLE dump ERROR_QUIET)
  if(dump MATCHES "SONAME +([^ \r\n]+)")
    set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
  else()
    get_filename_component(name ${library} NAME)
    set(${out} ${name} PARENT_SCOPE)
  endif()
endfunction()

function(ringmaster_report part found detail hint)
  if(found)
    message(STATUS "[ringmaster] ${part}: found (${detail})")
  else()
    message(STATUS "[ringmaster] ${part}: not found - ${hint}")
  endif()
endfunction()

# CUDA toolkit (nvcc, runtime, cuBLAS).
set(RINGMASTER_HAVE_CUDA OFF)
if(RINGMASTER_WITH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)  # CMake < 3.26 lacks nvcc's C++20 flag
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    # The runtime is linked statically: it opens the driver at its first call, so a process that
    # never touches a CUDA device maps no CUDA library (cuBLAS and NCCL are opened at their first
    # use, engine/core/shared_library.h).
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    set(CMAKE_CUDA_STANDARD 20)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(RINGMASTER_HAVE_CUDA ON)
      # For the install hints of a library that cannot be opened: "13.0", NVIDIA's package "13-0".
      set(RINGMASTER_CUDA_VERSION_DEFINITIONS
        "RINGMASTER_CUDA_VERSION=\"${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}\""
        "RINGMASTER_CUDA_PACKAGE_VERSION=\"${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}\"")
    endif()
  endif()
  ringmaster_report("CUDA toolkit" ${RINGMASTER_HAVE_CUDA}
    "nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}"
    "install NVIDIA's CUDA toolkit (nvcc, cuBLAS) under /usr/local/cuda; the CPU path is built")
else()
  message(STATUS "[ringmaster] CUDA toolkit: disabled by RINGMASTER_WITH_CUDA=OFF")
endif()

# NCCL, from the toolkit's directory or the system.
set(RINGMASTER_HAVE_NCCL OFF)
if(RINGMASTER_HAVE_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(RINGMASTER_HAVE_NCCL ON)
  endif()
  ringmaster_report("NCCL" ${RINGMASTER_HAVE_NCCL} "${NCCL_LIBRARY}"
    "install libnccl-dev (NVIDIA's repository) or NCCL into the CUDA toolkit; GPU collectives are off")
else()
  message(STATUS "[ringmaster] NCCL: not searched (no CUDA toolkit)")
endif()

# Qt 6 Widgets + Charts, for the desktop application.
find_package(Qt6 QUIET COMPONENTS Widgets Charts Concurrent Svg Test)
if(RINGMASTER_WITH_GUI AND Qt6_FOUND AND TARGET Qt6::Charts AND TARGET Qt6::Svg)
  set(RINGMASTER_HAVE_QT ON)
else()
  set(RINGMASTER_HAVE_QT OFF)
endif()
ringmaster_report("Qt 6 + Qt Charts" ${RINGMASTER_HAVE_QT} "Qt ${Qt6_VERSION}"
  "apt-get install qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev (or RINGMASTER_WITH_GUI is OFF); the desktop application is not built")

# libssh, for launching over SSH.
pkg_check_modules(LIBSSH QUIET IMPORTED_TARGET libssh)
ringmaster_report("libssh" ${LIBSSH_FOUND} "libssh ${LIBSSH_VERSION}"
  "apt-get install libssh-dev; only local launches are available")
set(RINGMASTER_HAVE_LIBSSH ${LIBSSH_FOUND})

# cpp-httplib, for the web dashboard's server (`ringmaster serve`, ui/web/).
pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
ringmaster_report("cpp-httplib" ${HTTPLIB_FOUND} "cpp-httplib ${HTTPLIB_VERSION}"
  "apt-get install libcpp-httplib-dev; `ringmaster serve` (the web dashboard) is not built")
set(RINGMASTER_HAVE_WEB ${HTTPLIB_FOUND})
