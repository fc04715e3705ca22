// The CUDA runtime entry points in a build without the toolkit: no devices, and any attempt to
// reach one is reported as unavailable rather than crashing.
#include "core/error.h"
#include "tensor/cuda/cuda_runtime.h"

namespace ringmaster::cuda {

int deviceCount() {
  return 0;
}

BackingMemory backingMemory() {
  RM_THROW(kUnavailable, "this build of Ringmaster has no CUDA support");
}

void copyBytes(void*, Device, const void*, Device, size_t) {
  RM_THROW(kUnavailable, "this build of Ringmaster has no CUDA support");
}

std::string deviceName(int) {
  RM_THROW(kUnavailable, "this build of Ringmaster has no CUDA support");
}

void synchronize(int) {}

std::string loadCublasLibrary() {
  RM_THROW(kUnavailable, "this build of Ringmaster has no CUDA support");
}

}  // namespace ringmaster::cuda
