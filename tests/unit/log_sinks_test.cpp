#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/child_process.hpp"
#include "core/log_sinks.hpp"

using namespace dblock;

TEST_CASE("journal entries: NAME=value lines, the binary form for a value with a line break") {
  CHECK(log_sinks::journal_entry({{"MESSAGE", "skipped 'k'"}, {"DBLOCK_EXIT", "75"}}) ==
        "MESSAGE=skipped 'k'\nDBLOCK_EXIT=75\n");
  const std::string two_lines = "a\nb";
  const std::string expected = std::string("MESSAGE\n") + std::string("\x03\0\0\0\0\0\0\0", 8) + "a\nb\n";
  CHECK(log_sinks::journal_entry({{"MESSAGE", two_lines}}) == expected);
}

TEST_CASE("syslog lines: priority of facility user, identifier and pid, one line") {
  const std::string line = log_sinks::syslog_line(5, "dblock", 42, "skipped\n'k'", 0);
  CHECK(line.starts_with("<13>"));  // user (1) * 8 + notice (5)
  CHECK(line.ends_with(" dblock[42]: skipped 'k'"));
  CHECK(line.size() == std::string("<13>Jan  1 00:00:00 dblock[42]: skipped 'k'").size());
}

TEST_CASE("an entry too large for a datagram goes to the journal in a sealed memfd") {
  char dir_template[] = "/tmp/dblock-sink-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/journal.sock";
  UniqueFd sock(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  REQUIRE(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);

  // Above the kernel's largest datagram (net.core.wmem_max, 208 KiB by default).
  const std::string payload = log_sinks::journal_entry({{"MESSAGE", std::string(4 << 20, 'x')}});
  REQUIRE(log_sinks::send_datagram(path, payload, true));

  char data[16];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{data, sizeof data};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  REQUIRE(::recvmsg(sock.get(), &msg, 0) == 0);  // an empty payload...
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  REQUIRE(c != nullptr);  // ...with one descriptor
  CHECK(c->cmsg_type == SCM_RIGHTS);
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  UniqueFd mem(fd);
  struct stat st{};
  REQUIRE(::fstat(mem.get(), &st) == 0);
  CHECK(static_cast<std::size_t>(st.st_size) == payload.size());
  std::string head(16, '\0');
  CHECK(::pread(mem.get(), head.data(), head.size(), 0) == 16);
  CHECK(head == payload.substr(0, 16));

  // syslog has no such form: a datagram too large is an error the caller avoids by cutting.
  CHECK_FALSE(log_sinks::send_datagram(path, payload, false));
  ::unlink(path.c_str());
  ::rmdir(dir_template);
}
