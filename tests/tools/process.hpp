#pragma once

// Runs a program as a child process with its stdout and stderr captured, for tests that
// drive a command-line tool: run to completion, or read its output line by line while
// it runs and signal it, optionally writing its standard input. Every wait is bounded, so a hung
// child fails the test instead of hanging it.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace beehive::test {

struct RunResult {
  int status = -1;  ///< exit status; 128 + signal number when killed by a signal
  std::string out;
  std::string err;
};

class Process {
 public:
  /// With `pipe_stdin`, the child's stdin is a pipe fed by write_stdin (and ended by
  /// close_stdin or the destructor); otherwise it inherits this process's.
  explicit Process(const std::vector<std::string>& args, bool pipe_stdin = false) {
    int out[2], err[2], in[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
        (pipe_stdin && pipe2(in, O_CLOEXEC) != 0))
      throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (pipe_stdin) posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    // SIGPIPE as a shell leaves it (write_stdin has this process ignore it): a child
    // writing to a reader that went must meet what it would in a pipeline.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawn(&pid_, argv[0], &fa, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(err[1]);
    if (pipe_stdin) {
      ::close(in[0]);
      in_fd_ = in[1];
    }
    out_fd_ = out[0];
    err_fd_ = err[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot run " + args[0]);
    }
  }
  ~Process() {
    close_stdin();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  /// The next line of stdout (without its newline), or nullopt at end of output or when
  /// `limit` passes first.
  std::optional<std::string> read_line(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (auto nl = pending_.find('\n'); nl != std::string::npos) {
        auto line = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        return line;
      }
      if (out_fd_ < 0 || !pump(until)) return std::nullopt;
    }
  }

  /// Reads stdout lines until one contains `text`; false at end of output or timeout.
  bool wait_for_line(const std::string& text,
                     std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (auto line = read_line(std::chrono::duration_cast<std::chrono::milliseconds>(
               until - std::chrono::steady_clock::now()))) {
      if (line->find(text) != std::string::npos) return true;
    }
    return false;
  }

  /// Reads the output until stderr holds `text`; false at end of output or timeout.
  bool wait_for_err(const std::string& text,
                    std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (all_err_.find(text) == std::string::npos)
      if (!pump(until)) return false;
    return true;
  }

  void signal(int sig) { ::kill(pid_, sig); }

  /// Whether `sig`, sent to the child, still waits to be delivered to it.
  bool signal_pending(int sig) const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    const unsigned long long bit = 1ull << (sig - 1);
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
        if (std::stoull(line.substr(7), nullptr, 16) & bit) return true;
    return false;
  }

  /// Whether the child waits in a write of its lines (each under a page): its stdout pipe
  /// has no page left, nobody reading it, and the child sleeps.
  bool blocked_on_full_stdout() const {
    int unread = 0;
    int capacity = out_fd_ < 0 ? -1 : ::fcntl(out_fd_, F_GETPIPE_SZ);
    if (capacity < 0 || ::ioctl(out_fd_, FIONREAD, &unread) != 0 || unread <= capacity - 4096)
      return false;
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string pid, name;
    char state = 0;  // after "PID (NAME)"; the tool's name has no blank
    return stat >> pid >> name >> state && state == 'S';
  }

  /// Writes all of `text` to the child's stdin (a pipe_stdin process only).
  void write_stdin(const std::string& text) {
    ::signal(SIGPIPE, SIG_IGN);  // a child that exited early is an error, not our death
    std::size_t done = 0;
    while (in_fd_ >= 0 && done < text.size()) {
      ssize_t n = ::write(in_fd_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("cannot write to the child's stdin");
      done += static_cast<std::size_t>(n);
    }
  }
  /// Stops reading the child's stdout, as a reader that went (`| head`): its next write
  /// meets a closed pipe.
  void close_stdout() {
    if (out_fd_ >= 0) ::close(out_fd_);
    out_fd_ = -1;
  }
  /// End of input for the child.
  void close_stdin() {
    if (in_fd_ >= 0) ::close(in_fd_);
    in_fd_ = -1;
  }

  /// Waits for the exit, collecting the remaining output; kills the child after `limit`.
  RunResult wait(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    close_stdin();
    auto until = std::chrono::steady_clock::now() + limit;
    while ((out_fd_ >= 0 || err_fd_ >= 0) && pump(until)) {
    }
    RunResult r;
    int st = 0;
    for (;;) {
      pid_t p = ::waitpid(pid_, &st, WNOHANG);
      if (p == pid_) break;
      if (std::chrono::steady_clock::now() > until) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        break;
      }
      ::usleep(1000);
    }
    pid_ = -1;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = all_out_;
    r.err = all_err_;
    return r;
  }

 private:
  /// Reads whatever is available from stdout and stderr, waiting until `until`;
  /// false when nothing more can come (both closed) or time is up.
  bool pump(std::chrono::steady_clock::time_point until) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    until - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0 || (out_fd_ < 0 && err_fd_ < 0)) return false;
    int n = ::poll(fds, 2, static_cast<int>(left));
    if (n <= 0) return n < 0 && errno == EINTR;
    drain(fds[0], out_fd_, &pending_, all_out_);
    drain(fds[1], err_fd_, nullptr, all_err_);
    return true;
  }
  static void drain(const pollfd& p, int& fd, std::string* pending, std::string& all) {
    if (fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) return;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) {
      ::close(fd);
      fd = -1;
      return;
    }
    all.append(buf, static_cast<std::size_t>(n));
    if (pending) pending->append(buf, static_cast<std::size_t>(n));
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1, in_fd_ = -1;
  std::string pending_, all_out_, all_err_;
};

/// Runs `args` to completion.
inline RunResult run(const std::vector<std::string>& args,
                     std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  Process p(args);
  return p.wait(limit);
}

/// Runs `args` to completion with `input` as its standard input.
inline RunResult run_with_input(const std::vector<std::string>& args, const std::string& input,
                                std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  Process p(args, /*pipe_stdin=*/true);
  p.write_stdin(input);
  return p.wait(limit);
}

}  // namespace beehive::test
