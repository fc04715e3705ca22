// RINGMASTER_UMASK read and checked, and the modes it gives new files and directories.
#include "core/file_modes.h"

#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

mode_t creationMask() {
  const char* text = std::getenv("RINGMASTER_UMASK");
  if (text == nullptr || *text == '\0') return 077;
  char* end = nullptr;
  const long mask = std::strtol(text, &end, 8);
  if (*end != '\0' || mask < 0 || mask > 0777) {
    RM_THROW(kInvalidArgument,
             fmt::format("RINGMASTER_UMASK={}: expected an octal mask such as 077 (owner only, "
                         "the default) or 027 (the group may read)",
                         text));
  }
  return static_cast<mode_t>(mask);
}

mode_t newFileMode() {
  return 0666 & ~creationMask();
}

mode_t newDirectoryMode() {
  return 0777 & ~creationMask();
}

}  // namespace ringmaster
