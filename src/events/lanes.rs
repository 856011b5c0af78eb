//! The bounded queue behind both ways an object reaches its host: the
//! callback thread's job queue (push mode, [`super::Dispatcher`]) and the
//! queue a host pulls from (pull mode, [`super::PullQueue`]).
//!
//! Two kinds of entries wait in one FIFO:
//! - **kept** entries (requests, completions, state changes, messages): each
//!   is delivered, in order. At most `max_kept` wait; one more is refused and
//!   the producer decides (a request is answered with an error at once, a
//!   notification is dropped and counted).
//! - **latest** entries, coalesced by a key (a plugin's `ui_push` on one
//!   channel): while one waits, a newer one with the same key replaces its
//!   content in place (counted as coalesced); it keeps its place in the FIFO.
//!   At most `max_keys` keys and `max_key_bytes` bytes wait; past either, the
//!   push is still taken (so nothing is lost) but the producer is told to
//!   slow down ([`Push::Full`]) and waits for [`Lanes::has_room`] before it
//!   produces more — the plugin's reader stops reading its socket, and the
//!   plugin's own `process.send` queue holds the rest.

use std::collections::{HashMap, VecDeque};

/// Bounds of one queue.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_kept: usize,
    pub max_keys: usize,
    pub max_key_bytes: usize,
}

/// What a push of a latest entry tells the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Taken; there is room for more.
    Taken,
    /// Taken, but the latest entries are over their bounds: wait for room.
    Full,
}

/// Counters a host can read (`stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Latest entries replaced by a newer one before delivery.
    pub coalesced: u64,
    /// Kept entries refused because `max_kept` were waiting.
    pub refused: u64,
}

enum Slot<T> {
    /// A kept entry; `true` when it counts against `max_kept`.
    Kept(T, bool),
    Latest(String),
}

pub struct Lanes<T> {
    order: VecDeque<Slot<T>>,
    latest: HashMap<String, (T, usize)>,
    /// Kept entries waiting that count against `max_kept`.
    kept: usize,
    /// Kept entries waiting that do not (see [`Lanes::push_owed`]).
    owed: usize,
    latest_bytes: usize,
    limits: Limits,
    stats: Stats,
}

impl<T> Lanes<T> {
    pub fn new(limits: Limits) -> Lanes<T> {
        Lanes {
            order: VecDeque::new(),
            latest: HashMap::new(),
            kept: 0,
            owed: 0,
            latest_bytes: 0,
            limits,
            stats: Stats::default(),
        }
    }

    /// Queues a kept entry; gives it back when `max_kept` already wait.
    pub fn push_kept(&mut self, item: T) -> Result<(), T> {
        if self.kept >= self.limits.max_kept {
            self.stats.refused += 1;
            return Err(item);
        }
        self.kept += 1;
        self.order.push_back(Slot::Kept(item, true));
        Ok(())
    }

    /// Queues a kept entry past `max_kept` (for entries bounded elsewhere:
    /// answers to the host's own calls, log lines under their own cap).
    pub fn push_owed(&mut self, item: T) {
        self.owed += 1;
        self.order.push_back(Slot::Kept(item, false));
    }

    /// Queues a latest entry of `bytes` under `key` (replacing a waiting one).
    pub fn push_latest(&mut self, key: String, bytes: usize, item: T) -> Push {
        match self.latest.get_mut(&key) {
            Some(waiting) => {
                self.latest_bytes = self.latest_bytes - waiting.1 + bytes;
                *waiting = (item, bytes);
                self.stats.coalesced += 1;
            }
            None => {
                self.latest_bytes += bytes;
                self.latest.insert(key.clone(), (item, bytes));
                self.order.push_back(Slot::Latest(key));
            }
        }
        if self.has_room() {
            Push::Taken
        } else {
            Push::Full
        }
    }

    /// True while latest entries are within their bounds.
    pub fn has_room(&self) -> bool {
        self.latest.len() < self.limits.max_keys && self.latest_bytes <= self.limits.max_key_bytes
    }

    /// Takes the next entry in order.
    pub fn pop(&mut self) -> Option<T> {
        loop {
            match self.order.pop_front()? {
                Slot::Kept(item, bounded) => {
                    if bounded {
                        self.kept -= 1;
                    } else {
                        self.owed -= 1;
                    }
                    return Some(item);
                }
                Slot::Latest(key) => {
                    if let Some((item, bytes)) = self.latest.remove(&key) {
                        self.latest_bytes -= bytes;
                        return Some(item);
                    }
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Entries waiting (kept and latest).
    pub fn len(&self) -> usize {
        self.kept + self.owed + self.latest.len()
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Drops every waiting entry (shutdown).
    pub fn clear(&mut self) {
        self.order.clear();
        self.latest.clear();
        self.kept = 0;
        self.owed = 0;
        self.latest_bytes = 0;
    }
}

#[cfg(test)]
mod tests;
