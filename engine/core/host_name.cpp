// This machine's host name (core/host_name.h).
#include "core/host_name.h"

#include <unistd.h>

namespace ringmaster {

std::string thisHostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return {};
  return name;
}

}  // namespace ringmaster
