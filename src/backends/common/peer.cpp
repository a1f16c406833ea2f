#include "backends/common/peer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace dblock {

Peer socket_peer(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (fd < 0 || getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {false, "an unknown address"};
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_UNIX) return {true, "a Unix socket"};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return {(ntohl(in->sin_addr.s_addr) >> 24) == 127, text};
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    const bool mapped_loopback = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
    return {IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || mapped_loopback, text};
  }
  return {false, "an unknown address"};
}

}  // namespace dblock
