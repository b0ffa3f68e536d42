// PeerWatch: notices that the client of a connection went away while a
// request runs, so that the connection can end the exchange (and cancel the
// engine request) without knowing how that is found out.
//
// The connection is the Host: it says whether a look is wanted now and hears
// what was found. Owned by its HttpSession, one per connection, and used only
// on that connection's strand (not thread-safe); every wait it queues holds
// the Host alive until it completed, and the Host owns the watch.
#pragma once

#include <cstdint>
#include <memory>

#include <boost/asio/ip/tcp.hpp>

namespace loragate {

class PeerWatch {
 public:
  class Host {
   public:
    virtual ~Host() = default;
    // An exchange runs whose client is not known gone, and its last write is
    // not on its way yet (once it is, that write's completion decides how the
    // exchange ended).
    virtual bool wants_watch() const = 0;
    // Exchange `seq` runs and nothing of its answer was written yet.
    virtual bool awaits_answer(uint64_t seq) const = 0;
    // The client will send nothing more: answer, then close.
    virtual void peer_done_sending() = 0;
    // The client is gone.
    virtual void peer_gone() = 0;
  };

  virtual ~PeerWatch() = default;
  // Watches the client of exchange `seq` (of an HTTP/`http_version` request)
  // until the exchange ends.
  virtual void watch(std::shared_ptr<Host> host, uint64_t seq, unsigned http_version) = 0;
  // Stops the waits that can be stopped; called when the connection closes.
  virtual void cancel() = 0;
};

// Watches the TCP socket itself: readiness, a peek, and the connection state.
// A FIN alone does not tell a client that left from one that only shut its
// sending side and still reads (shutdown(SHUT_WR)): the exchange goes on, and
// an HTTP/1.1 client not yet answered is sent an interim "100 Continue"
// (which every HTTP/1.1 client must accept) so that a client that is gone
// answers with a reset, polled for in the TCP state.
std::unique_ptr<PeerWatch> make_socket_peer_watch(boost::asio::ip::tcp::socket& socket);

}  // namespace loragate
