// This machine's host name, as gethostname(2) gives it: what the run database records as the host
// of a recorder or a sweep's driver, and what tells a process on this host from another's.
#pragma once

#include <string>

namespace ringmaster {

// "" when the kernel does not say.
std::string thisHostName();

}  // namespace ringmaster
