// A real read-only file system for tests, which chmod cannot give root: a child process in its own
// user and mount namespace where a directory is a tmpfs remounted read-only.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

namespace ringmaster::testing {

// The exit code onReadOnlyFileSystem returns when this machine does not allow the namespaces.
inline constexpr int kNoNamespaces = 77;

// Runs `body` in a child process inside its own user and mount namespace where `directory` is a
// read-only tmpfs holding a copy of `file`, passing the copy's path. Returns the child's exit code
// (`body`'s result; 79 when it threw, its message on stderr); kNoNamespaces when namespaces are
// not allowed here. The child calls only what `body` calls: no Qt, no threads of the parent.
inline int onReadOnlyFileSystem(const std::filesystem::path& directory,
                                const std::filesystem::path& file,
                                const std::function<int(const std::filesystem::path&)>& body) {
  namespace fs = std::filesystem;
  fs::create_directories(directory);
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  const pid_t child = ::fork();
  if (child == 0) {
    const auto write_file = [](const char* name, const std::string& text) {
      const int fd = ::open(name, O_WRONLY);
      const bool ok =
          fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      if (fd >= 0) ::close(fd);
      return ok;
    };
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(kNoNamespaces);
    write_file("/proc/self/setgroups", "deny");
    if (!write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1") ||
        ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", directory.c_str(), "tmpfs", 0, nullptr) != 0)
      ::_exit(kNoNamespaces);
    std::error_code ec;
    fs::copy_file(file, directory / file.filename(), ec);
    if (ec || ::mount(nullptr, directory.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0)
      ::_exit(78);
    try {
      ::_exit(body(directory / file.filename()));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      ::_exit(79);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace ringmaster::testing
