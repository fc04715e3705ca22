// SharedLibrary: the folders searched in order, and errors that name the library, the loader's
// reason for each folder, and what to install.
#include "core/shared_library.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace ringmaster {

namespace {

// What to pass to dlopen, in order: a bare name makes the loader search its own folders.
std::vector<std::string> candidatePaths(const SharedLibrarySpec& spec, const char* forced_dir) {
  if (forced_dir != nullptr) return {fmt::format("{}/{}", forced_dir, spec.soname)};
  std::vector<std::string> paths{spec.soname};
  if (!spec.build_dir.empty()) paths.push_back(fmt::format("{}/{}", spec.build_dir, spec.soname));
  return paths;
}

// The file the loader mapped for `handle` (dlopen of a bare name does not say where it found it).
std::string mappedPath(void* handle, const std::string& requested) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      *map->l_name != '\0') {
    return map->l_name;
  }
  return requested;
}

// The environment variable's folder, when it is set and not empty.
const char* forcedDir(const SharedLibrarySpec& spec) {
  if (spec.dir_variable.empty()) return nullptr;
  const char* dir = std::getenv(spec.dir_variable.c_str());
  return dir != nullptr && *dir != '\0' ? dir : nullptr;
}

}  // namespace

SharedLibrary::SharedLibrary(void* handle, std::string path, const SharedLibrarySpec& spec)
    : handle_(handle), path_(std::move(path)), install_hint_(spec.install_hint) {}

SharedLibrary SharedLibrary::open(const SharedLibrarySpec& spec) {
  const char* forced_dir = forcedDir(spec);
  std::vector<std::string> reasons;
  for (const std::string& candidate : candidatePaths(spec, forced_dir)) {
    (void)dlerror();  // clear a stale message, so the one read below is this call's
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      return SharedLibrary(handle, mappedPath(handle, candidate), spec);
    }
    const char* reason = dlerror();
    reasons.push_back(reason != nullptr ? reason : candidate + ": the loader gave no reason");
  }
  const std::string only_from = forced_dir != nullptr
                                    ? fmt::format(" from {}={}", spec.dir_variable, forced_dir)
                                    : std::string();
  RM_THROW(kUnavailable,
           fmt::format("cannot load {} ({}){}: {}. {}, or set {} to the folder that holds {}",
                       spec.soname, spec.purpose, only_from, fmt::join(reasons, "; "),
                       spec.install_hint, spec.dir_variable, spec.soname));
}

void* SharedLibrary::address(const char* symbol) const {
  (void)dlerror();
  void* address = dlsym(handle_, symbol);
  if (address == nullptr) {
    const char* reason = dlerror();
    RM_THROW(kUnavailable,
             fmt::format("{} lacks {} ({}): it is older than this build needs. {}", path_, symbol,
                         reason != nullptr ? reason : "not found", install_hint_));
  }
  return address;
}

}  // namespace ringmaster
