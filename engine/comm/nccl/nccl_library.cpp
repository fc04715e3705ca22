// NCCL opened at its first use (nccl_library.h). The library is searched as SharedLibrary::open
// says, by the name and in the folder the build found it in (engine/comm/CMakeLists.txt passes
// them).
#include "comm/nccl/nccl_library.h"

#include <fmt/format.h>

#include "core/shared_library.h"

namespace ringmaster {

namespace {

SharedLibrarySpec ncclSpec() {
  return SharedLibrarySpec{
      .soname = RINGMASTER_NCCL_SONAME,
      .purpose = "NCCL, for the nccl backend's collectives on CUDA devices",
      .install_hint = fmt::format(
          "Install NCCL {} for CUDA {} (NVIDIA's package libnccl{}, or NCCL into the CUDA "
          "toolkit's folder)",
          NCCL_MAJOR, RINGMASTER_CUDA_VERSION, NCCL_MAJOR),
      .build_dir = RINGMASTER_NCCL_DIR,
  };
}

// Every function the backend calls; a library without one of them fails here, not mid-training.
NcclLibrary resolve(const SharedLibrary& library) {
  NcclLibrary functions;
  functions.getErrorString = RM_LIBRARY_FUNCTION(library, ncclGetErrorString);
  functions.getUniqueId = RM_LIBRARY_FUNCTION(library, ncclGetUniqueId);
  functions.commInitRankConfig = RM_LIBRARY_FUNCTION(library, ncclCommInitRankConfig);
  functions.commGetAsyncError = RM_LIBRARY_FUNCTION(library, ncclCommGetAsyncError);
  functions.commFinalize = RM_LIBRARY_FUNCTION(library, ncclCommFinalize);
  functions.commDestroy = RM_LIBRARY_FUNCTION(library, ncclCommDestroy);
  functions.commAbort = RM_LIBRARY_FUNCTION(library, ncclCommAbort);
  functions.redOpCreatePreMulSum = RM_LIBRARY_FUNCTION(library, ncclRedOpCreatePreMulSum);
  functions.redOpDestroy = RM_LIBRARY_FUNCTION(library, ncclRedOpDestroy);
  functions.allReduce = RM_LIBRARY_FUNCTION(library, ncclAllReduce);
  functions.broadcast = RM_LIBRARY_FUNCTION(library, ncclBroadcast);
  functions.reduce = RM_LIBRARY_FUNCTION(library, ncclReduce);
  functions.allGather = RM_LIBRARY_FUNCTION(library, ncclAllGather);
  functions.reduceScatter = RM_LIBRARY_FUNCTION(library, ncclReduceScatter);
  functions.send = RM_LIBRARY_FUNCTION(library, ncclSend);
  functions.recv = RM_LIBRARY_FUNCTION(library, ncclRecv);
  functions.groupStart = RM_LIBRARY_FUNCTION(library, ncclGroupStart);
  functions.groupEnd = RM_LIBRARY_FUNCTION(library, ncclGroupEnd);
  return functions;
}

}  // namespace

const NcclLibrary& nccl() {
  static const NcclLibrary functions = resolve(SharedLibrary::open(ncclSpec()));
  return functions;
}

std::string loadNcclLibrary() {
  SharedLibrary library = SharedLibrary::open(ncclSpec());
  resolve(library);
  return library.path();
}

}  // namespace ringmaster
