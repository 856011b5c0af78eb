use std::time::{Duration, Instant};

use super::*;

const RATE: Rate = Rate {
    capacity: 2.0,
    per_second: 1.0,
};

struct Metered {
    bucket: TokenBucket,
}

fn track<'a>(lru: &'a mut Lru<Metered>, key: &str, now: Instant) -> &'a mut Metered {
    lru.track_metered(
        key,
        2,
        RATE,
        now,
        |m| &m.bucket,
        || Metered {
            bucket: TokenBucket::full(RATE, now),
        },
    )
}

#[test]
fn a_bucket_refills_at_its_rate_up_to_its_capacity() {
    let t0 = Instant::now();
    let mut b = TokenBucket::full(RATE, t0);
    b.tokens = 0.0;
    assert!(!b.refilled_by(RATE, t0 + Duration::from_secs(1)));
    b.refill(RATE, t0 + Duration::from_secs(1));
    assert_eq!(b.tokens, 1.0);
    assert_eq!(b.last_refill, t0 + Duration::from_secs(1));
    assert!(b.refilled_by(RATE, t0 + Duration::from_secs(2)));
    b.refill(RATE, t0 + Duration::from_secs(10));
    assert_eq!(b.tokens, 2.0);
}

#[test]
fn a_full_lru_of_buckets_forgets_an_idle_one_first_else_the_oldest() {
    let t0 = Instant::now();
    let mut lru = Lru::default();
    track(&mut lru, "a", t0).bucket.tokens = 0.0;
    track(&mut lru, "b", t0).bucket.tokens = 0.0;
    // Nobody is idle: the oldest goes.
    track(&mut lru, "c", t0);
    assert_eq!(lru.keys_oldest_first(), vec!["b", "c"]);
    // `c` never spent a token: it goes before the older `b`.
    track(&mut lru, "d", t0).bucket.tokens = 0.0;
    assert_eq!(lru.keys_oldest_first(), vec!["b", "d"]);
    // Tracking a known key keeps its bucket and makes it the newest.
    assert_eq!(track(&mut lru, "b", t0).bucket.tokens, 0.0);
    assert_eq!(lru.keys_oldest_first(), vec!["d", "b"]);
    // Two seconds on, both refilled: the oldest idle one goes.
    track(&mut lru, "e", t0 + Duration::from_secs(2));
    assert_eq!(lru.keys_oldest_first(), vec!["b", "e"]);
}
