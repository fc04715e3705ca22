// The paths of test_paths.h, from the definitions tests/CMakeLists.txt gives this one file.
#include "common/test_paths.h"

namespace ringmaster {

const char* testSourceDir() {
  return RINGMASTER_SOURCE_DIR;
}

const char* testBinaryDir() {
  return RINGMASTER_BINARY_DIR;
}

}  // namespace ringmaster
