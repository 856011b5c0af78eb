//! Cross-session messaging (`src/sessions`): participants, their registry
//! records and sockets, the wire frames.

/// What a participant does at process exit (re-runs this binary as a child).
mod exit;
/// Property tests of the frame parser.
mod fuzz;
/// Participants talking to each other and to raw peers.
// Talks to inboxes and the registry as UNIX-domain sockets, 0700/0600
// modes and symlinks: Unix by nature (Windows inboxes are named pipes).
#[cfg(unix)]
mod participant;
