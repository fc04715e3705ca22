// Where the tests find the source tree (examples, scripts, docs) and the build tree (the programs
// they run). Defined in test_paths.cpp, the one test object compiled with these absolute paths, so
// that every other test object is the same in any clone and a compiler cache shared by clones hits.
#pragma once

namespace ringmaster {

// The source tree's root, without a trailing slash.
const char* testSourceDir();

// The build tree's root (the configuration's binary directory), without a trailing slash.
const char* testBinaryDir();

}  // namespace ringmaster
