//! Building blocks both sides of a conversation use to mirror the
//! receiver's limits: the two-clock [`Now`], token-bucket refill, the body
//! hash of the duplicate window, the insertion-ordered [`Lru`], and a
//! bounded LRU of token buckets that forgets idle (full) buckets first.
//! The receiver's gate (`gate::Admission`) meters senders with them; the
//! sender's outbox (`outbox::Outbox`) meters the inboxes it writes to.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// A point in time on both clocks: ages are the larger of the monotonic
/// and the wall-clock difference (suspend advances only the wall clock; a
/// backward wall step then changes nothing).
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub mono: Instant,
    pub wall_ms: f64,
}

impl Now {
    pub fn real() -> Now {
        Now {
            mono: Instant::now(),
            wall_ms: wall_ms(),
        }
    }
    /// `self` moved forward by `d` on both clocks (tests).
    pub fn plus(self, d: Duration) -> Now {
        Now {
            mono: self.mono + d,
            wall_ms: self.wall_ms + d.as_secs_f64() * 1000.0,
        }
    }
    pub fn age_ms(self, since: Now) -> f64 {
        let mono = self
            .mono
            .saturating_duration_since(since.mono)
            .as_secs_f64()
            * 1000.0;
        mono.max(self.wall_ms - since.wall_ms)
    }
}

/// Milliseconds since the epoch.
pub fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

fn secs_between(later: Instant, earlier: Instant) -> f64 {
    later.saturating_duration_since(earlier).as_secs_f64()
}

pub(crate) fn refill(
    tokens: f64,
    last: Instant,
    now: Instant,
    capacity: f64,
    per_second: f64,
) -> f64 {
    capacity.min(tokens + secs_between(now, last) * per_second)
}

pub fn body_hash(body: &str) -> [u8; 32] {
    Sha256::digest(body.as_bytes()).into()
}

/// A small insertion-ordered map whose `touch` moves a key to the end.
#[derive(Debug, Clone)]
pub struct Lru<V> {
    map: HashMap<String, (u64, V)>,
    order: VecDeque<(u64, String)>,
    seq: u64,
}

impl<V> Default for Lru<V> {
    fn default() -> Self {
        Lru {
            map: HashMap::new(),
            order: VecDeque::new(),
            seq: 0,
        }
    }
}

impl<V> Lru<V> {
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn get(&self, k: &str) -> Option<&V> {
        self.map.get(k).map(|(_, v)| v)
    }
    pub fn get_mut(&mut self, k: &str) -> Option<&mut V> {
        self.map.get_mut(k).map(|(_, v)| v)
    }
    /// Inserts (or replaces) `k`, making it the newest.
    pub fn insert(&mut self, k: String, v: V) {
        self.seq += 1;
        self.map.insert(k.clone(), (self.seq, v));
        self.order.push_back((self.seq, k));
        self.compact();
    }
    /// Makes `k` the newest; false when absent.
    pub fn touch(&mut self, k: &str) -> bool {
        let Some(entry) = self.map.get_mut(k) else {
            return false;
        };
        self.seq += 1;
        entry.0 = self.seq;
        self.order.push_back((self.seq, k.to_string()));
        self.compact();
        true
    }
    pub fn remove(&mut self, k: &str) -> Option<V> {
        self.map.remove(k).map(|(_, v)| v)
    }
    /// Keys from oldest to newest.
    pub fn keys_oldest_first(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|(s, k)| self.map.get(k).is_some_and(|(cur, _)| cur == s))
            .map(|(_, k)| k.clone())
            .collect()
    }
    pub fn pop_oldest(&mut self) -> Option<(String, V)> {
        while let Some((s, k)) = self.order.pop_front() {
            if self.map.get(&k).is_some_and(|(cur, _)| *cur == s) {
                let (_, v) = self.map.remove(&k)?;
                return Some((k, v));
            }
        }
        None
    }
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.map.values_mut().map(|(_, v)| v)
    }
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.map.values().map(|(_, v)| v)
    }
    fn compact(&mut self) {
        if self.order.len() > 2 * self.map.len() + 32 {
            let map = &self.map;
            self.order
                .retain(|(s, k)| map.get(k).is_some_and(|(cur, _)| cur == s));
        }
    }
}

/// A token bucket's size and speed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    pub capacity: f64,
    pub per_second: f64,
}

/// The tokens a bucket held when it was last refilled.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    pub tokens: f64,
    pub last_refill: Instant,
}

impl TokenBucket {
    pub fn full(rate: Rate, now: Instant) -> TokenBucket {
        TokenBucket {
            tokens: rate.capacity,
            last_refill: now,
        }
    }

    /// Adds what came back since the last refill (up to the capacity).
    pub fn refill(&mut self, rate: Rate, now: Instant) {
        self.tokens = refill(
            self.tokens,
            self.last_refill,
            now,
            rate.capacity,
            rate.per_second,
        );
        self.last_refill = now;
    }

    /// Whether the bucket is full again by `now` (its owner is idle).
    pub fn refilled_by(&self, rate: Rate, now: Instant) -> bool {
        refill(
            self.tokens,
            self.last_refill,
            now,
            rate.capacity,
            rate.per_second,
        ) >= rate.capacity
    }
}

impl<V> Lru<V> {
    /// The entry for `key`, made the newest. When absent, `make()` is added
    /// once there is room for it among `max` entries: the oldest entry whose
    /// bucket (`bucket`, of `rate`) is full again by `now` is forgotten first
    /// (forgetting it loses nothing), else the oldest entry.
    pub(crate) fn track_metered(
        &mut self,
        key: &str,
        max: usize,
        rate: Rate,
        now: Instant,
        bucket: impl Fn(&V) -> &TokenBucket,
        make: impl FnOnce() -> V,
    ) -> &mut V {
        if !self.touch(key) {
            while self.len() >= max {
                let keys = self.keys_oldest_first();
                let victim = keys
                    .iter()
                    .find(|k| {
                        self.get(k)
                            .is_some_and(|v| bucket(v).refilled_by(rate, now))
                    })
                    .cloned();
                match victim {
                    Some(v) => {
                        self.remove(&v);
                    }
                    None => {
                        self.pop_oldest();
                    }
                }
            }
            self.insert(key.to_string(), make());
        }
        self.get_mut(key).expect("just inserted")
    }
}

#[cfg(test)]
mod tests;
