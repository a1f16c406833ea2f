#pragma once
// The session strategies (advisory, for-update, txn-insert), once for every backend: the lock
// is the server's, held by one database session (the holder), and dies with it. Around it this
// file owns every decision: the token, numbered in <prefix>locks on the bookkeeping session
// (autocommit, so a holder killed mid-transaction cannot roll back a token it was given), the
// semaphore header, --min-interval, the release and its history row, schema repair and what a
// dead session means. The dialect supplies only the server lock itself (SessionLock) and its
// statements (statements.hpp).

#include <memory>
#include <string>

#include "core/locker.hpp"
#include "core/sql/statements.hpp"

namespace dblock::sql {

/// A session strategy's lock on the server, in its holder session: GET_LOCK, an advisory lock,
/// a row lock or an uncommitted row in a transaction held open. The one part each dialect writes.
class SessionLock {
 public:
  virtual ~SessionLock() = default;

  /// Takes the server lock on `key`, letting the server wait up to `wait` (0: answer at once; a
  /// dialect may wait less, core calls again). true: taken; false: someone else holds it. A busy
  /// or failed attempt leaves nothing held and no transaction open. ErrorKind::connection: the
  /// holder session is gone, and with it anything it held.
  virtual Result<bool> take(const std::string& key, Millis wait) = 0;
  /// Whether the holder session still holds `key` (the heartbeat's proof; never reconnects).
  virtual Result<bool> holds(const std::string& key) = 0;
  /// Lets the server lock on `key` go: an unlock, or the end of the holding transaction. An
  /// error (the session is gone, say) means the lock was not held to the end.
  virtual Result<void> give_back(const std::string& key) = 0;
  /// What <prefix>locks.session_id records for the holder, which status and `release --force`
  /// ask the server about (valid after a take).
  virtual std::string session_id() const = 0;
  /// The holder session's socket (core watches it), or -1 when closed.
  virtual int socket() const = 0;
  /// Opens the holder session anew; only called while nothing is held.
  virtual Result<void> reopen() = 0;
  /// How a waiter hears a release when take() waited less than asked (a row lock that waits in
  /// whole seconds only), or a signal that never tells. A signal that uses a connection uses the
  /// bookkeeping session's, which the locker makes again when it is lost.
  virtual ReleaseSignal& release_signal() = 0;

  /// Whether the holder session is also the bookkeeping session and the lock outlives the
  /// commit of the statement that took it (PostgreSQL advisory): then take_numbered takes the
  /// lock and numbers the row in one statement, so the waiter a release lets in has its token
  /// without another round trip. false: take(), then session_take.
  virtual bool folds_row() const { return false; }
  /// What take_numbered() answered: `taken` (false: someone else holds the lock) and, taken,
  /// session_take's rows (affected 0: not numbered, the lock held all the same).
  struct NumberedTake {
    bool taken = false;
    Rows numbered;
  };
  /// take(), then, once taken, session_take with `number` in the same statement (folds_row only).
  virtual Result<NumberedTake> take_numbered(const std::string& key, Millis wait, const Params& number);
};

/// The locker of `strategy` (a session strategy): the server lock `lock`, the token and history
/// on `book` (which may be the holder's own session when the lock is held outside a
/// transaction), with the dialect's `statements`. `prefix` is the table prefix (release_channel),
/// `keep` the history rows kept per key.
std::unique_ptr<Locker> make_session_locker(Strategy strategy, std::unique_ptr<SessionLock> lock,
                                            std::shared_ptr<Session> book, const LeaseStatements& statements,
                                            std::string prefix, int keep);

}  // namespace dblock::sql
