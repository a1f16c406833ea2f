#pragma once
// One descriptor sent along with a datagram (SCM_RIGHTS): the guard gets the lock session's
// socket this way (child_process.cpp), the journal a large entry's memfd (log_sinks.cpp).

#include <sys/socket.h>

#include <cstring>

namespace dblock {

/// The ancillary-data buffer of one descriptor; it must outlive the sendmsg call.
class PassedFd {
 public:
  /// Points msg's control data at this buffer, carrying fd.
  void attach(msghdr& msg, int fd) {
    msg.msg_control = buf_;
    msg.msg_controllen = sizeof buf_;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }

 private:
  alignas(cmsghdr) char buf_[CMSG_SPACE(sizeof(int))] = {};
};

}  // namespace dblock
