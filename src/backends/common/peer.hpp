#pragma once
// The address a connected socket reaches, for doctor's tls line (core/sql/sql_session.hpp,
// Transport): a Unix socket or a loopback address keeps everything on this host.

#include <string>

namespace dblock {

struct Peer {
  bool local = false;
  std::string address;  // "127.0.0.1", "::1", "10.0.0.5", or "a Unix socket"
};

/// The peer of connected socket `fd` (getpeername); an unknown one is not local.
Peer socket_peer(int fd);

}  // namespace dblock
