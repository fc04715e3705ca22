// The modes of what Ringmaster creates (databases, run directories, specs, checkpoints):
// owner-only unless RINGMASTER_UMASK says otherwise.
#pragma once

#include <sys/types.h>

namespace ringmaster {

// The mask applied to what Ringmaster creates: RINGMASTER_UMASK (octal, 077 .. 000; 027 lets the
// group read) when set, else 077: owner-only. The process umask still applies on top. Throws
// kInvalidArgument for a value that is not an octal mask.
mode_t creationMask();
mode_t newFileMode();       // 0666 without the creation mask: 0600 by default
mode_t newDirectoryMode();  // 0777 without the creation mask: 0700 by default

}  // namespace ringmaster
