//! Seed 002: cross-session participant (registry record, inbox with the
//! receiver's gate, send with delivery receipts).
