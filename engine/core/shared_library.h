// A shared library opened while the process runs (dlopen) and its functions found by name (dlsym),
// for the libraries only some runs need: cuBLAS and NCCL, on CUDA devices. A process that never
// uses them never maps them. An opened library stays loaded for the life of the process.
#pragma once

#include <string>

namespace ringmaster {

// What to open, where, and what to tell a person when it cannot be opened.
struct SharedLibrarySpec {
  std::string soname;        // "libcublas.so.13": the name the loader searches for
  std::string purpose;       // "cuBLAS, for matrix products on CUDA devices"
  std::string install_hint;  // "Install NVIDIA's libcublas-13-0 (or the CUDA 13 toolkit)"
  std::string build_dir;     // the folder the build found it in, searched last ("" for none)
  // An environment variable that, when set and not empty, names the only folder searched.
  std::string dir_variable = "RINGMASTER_CUDA_LIBRARY_DIR";
};

class SharedLibrary {
 public:
  // Opens spec.soname from $dir_variable alone when it is set; otherwise through the loader's own
  // search (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache, the system folders), then
  // from spec.build_dir. Throws kUnavailable naming the library, what it is for, each folder's
  // dlerror() text, and what to install.
  static SharedLibrary open(const SharedLibrarySpec& spec);

  // The function `symbol` as `Function`, a function pointer type; kUnavailable naming the symbol,
  // the library's path and the dlerror() text when the library lacks it (an older version).
  template <typename Function>
  Function function(const char* symbol) const {
    return reinterpret_cast<Function>(address(symbol));
  }

  // The file the loader mapped.
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path, const SharedLibrarySpec& spec);
  void* address(const char* symbol) const;

  void* handle_;  // never dlclose'd: CUDA libraries do not survive being unloaded
  std::string path_;
  std::string install_hint_;
};

}  // namespace ringmaster

// Resolves `symbol` from `library` as a pointer to the function the header declares, so that the
// type and the name cannot disagree: RM_LIBRARY_FUNCTION(library, ncclAllReduce).
#define RM_LIBRARY_FUNCTION(library, symbol) (library).function<decltype(&symbol)>(#symbol)
