#pragma once

// A helper process for tests that need a second process on the same database: spawned
// with its stdin and stdout on pipes, talked to a line at a time, killed at the end.

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace beehive::test {

class ChildProcess {
 public:
  ChildProcess(std::string exe, std::vector<std::string> args) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    args.insert(args.begin(), exe);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = ::posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (rc != 0) throw std::runtime_error("cannot spawn " + exe + ": " + std::strerror(rc));
  }
  ~ChildProcess() {
    kill(SIGKILL);
    ::close(to_);
    ::close(from_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// The next line it prints, or what it printed before "<eof>" (10 s at most).
  std::string read_line() {
    std::string line;
    char c;
    pollfd p{from_, POLLIN, 0};
    while (::poll(&p, 1, 10000) == 1 && ::read(from_, &c, 1) == 1) {
      if (c == '\n') return line;
      line += c;
    }
    return line + "<eof>";
  }
  bool write_line(const std::string& s) {
    auto l = s + "\n";
    return ::write(to_, l.data(), l.size()) == static_cast<ssize_t>(l.size());
  }
  /// Waits for it to exit: its exit code, or 128 + the signal that ended it.
  int wait() {
    if (pid_ <= 0) return status_;
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = 0;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
  }
  /// Sends `sig` (SIGSTOP, SIGCONT) without waiting for the process.
  void signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  /// Sends SIGSTOP and returns once every thread of it has stopped.
  void pause() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGSTOP);
    int st = 0;
    while (::waitpid(pid_, &st, WUNTRACED) == pid_ && !WIFSTOPPED(st)) {
    }
  }
  pid_t pid() const { return pid_; }
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    wait();
  }

 private:
  pid_t pid_ = 0;
  int to_ = -1, from_ = -1;
  int status_ = -1;
};

}  // namespace beehive::test
