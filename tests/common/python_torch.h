// Whether the python3 that program jobs' tests run (RINGMASTER_PYTHON_TORCH: Debian's, with
// python3-torch) can import torch.distributed: the reason to skip, empty when it can.
#pragma once

#include <chrono>
#include <string>

#include "common/captured_process.h"

namespace ringmaster::testing {

inline std::string pythonTorchUnavailable(const std::string& python) {
  CapturedProcess probe(python, {"-c", "import torch.distributed"});
  if (probe.wait(std::chrono::seconds(60)).ok()) return {};
  return python + " cannot import torch.distributed (Debian: python3-torch)";
}

}  // namespace ringmaster::testing
