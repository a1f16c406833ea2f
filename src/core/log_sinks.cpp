#include "core/log_sinks.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/child_process.hpp"
#include "core/fd_passing.hpp"

namespace dblock::log_sinks {
namespace {

Result<void> errno_error(const std::string& what) {
  return fail(ErrorKind::other, what + ": " + std::strerror(errno));
}

// The memfd way of the native protocol: the entry in a sealed memfd, sent as the only
// SCM_RIGHTS descriptor of an empty datagram.
Result<void> send_memfd(int sock, const sockaddr_un& addr, std::string_view payload) {
  UniqueFd mem(::memfd_create("dblock-journal", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (mem.get() < 0) return errno_error("memfd_create");
  for (std::size_t done = 0; done < payload.size();) {
    ssize_t n = ::write(mem.get(), payload.data() + done, payload.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return errno_error("writing the memfd");
    done += static_cast<std::size_t>(n);
  }
  if (::fcntl(mem.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    return errno_error("sealing the memfd");
  // journald maps the file; a reader that read()s it must start at the beginning.
  ::lseek(mem.get(), 0, SEEK_SET);
  msghdr msg{};
  msg.msg_name = const_cast<sockaddr_un*>(&addr);
  msg.msg_namelen = sizeof addr;
  PassedFd passed;
  passed.attach(msg, mem.get());
  if (::sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) return errno_error("sending to the journal");
  return {};
}

}  // namespace

std::string syslog_line(int severity, std::string_view ident, long pid, std::string_view message, std::int64_t epoch_s) {
  static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  constexpr int facility_user = 1;
  time_t secs = static_cast<time_t>(epoch_s);
  tm t{};
  localtime_r(&secs, &t);
  char head[64];
  std::snprintf(head, sizeof head, "<%d>%s %2d %02d:%02d:%02d ", facility_user * 8 + severity, months[t.tm_mon % 12],
                t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec);
  std::string line = head;
  line += ident;
  line += "[" + std::to_string(pid) + "]: ";
  for (char ch : message) line += (ch == '\n' || ch == '\r') ? ' ' : ch;
  return line;
}

std::string journal_entry(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    out += name;
    if (value.find('\n') == std::string::npos) {
      out += '=';
    } else {
      out += '\n';
      std::uint64_t n = value.size();
      for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
    }
    out += value;
    out += '\n';
  }
  return out;
}

Result<void> send_datagram(const std::string& path, std::string_view payload, bool memfd_fallback) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return fail(ErrorKind::other, "socket path too long: " + path);
  std::memcpy(addr.sun_path, path.data(), path.size());
  UniqueFd sock(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) return errno_error("socket");
  // Never block the run on a stalled receiver: a full socket buffer drops the line.
  const int flags = MSG_NOSIGNAL | MSG_DONTWAIT;
  if (::sendto(sock.get(), payload.data(), payload.size(), flags, reinterpret_cast<const sockaddr*>(&addr),
               sizeof addr) >= 0)
    return {};
  if (errno == EMSGSIZE && memfd_fallback) return send_memfd(sock.get(), addr, payload);
  return errno_error(path);
}

}  // namespace dblock::log_sinks
