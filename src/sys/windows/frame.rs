//! libuv's IPC framing on Windows. Node's channel there is a named pipe on
//! which every write carries a 16-byte header (little-endian `u32`s:
//! `flags`, `reserved1` (ignored), `data_length`, `reserved2` (must be 0)),
//! then, when `flags` has `HAS_SOCKET_XFER`, a 632-byte socket-transfer
//! record, then `data_length` payload bytes. `flags` outside `0x07` or a
//! non-zero `reserved2` make libuv drop the channel (`ECONNABORTED`).

use std::io;

/// The header length.
pub const HEADER_LEN: usize = 16;
/// The socket-transfer record (`WSAPROTOCOL_INFOW` + a delayed error).
const XFER_INFO_LEN: usize = 632;
const HAS_DATA: u32 = 0x01;
const HAS_SOCKET_XFER: u32 = 0x02;
const XFER_IS_TCP_CONNECTION: u32 = 0x04;
const VALID_FLAGS: u32 = 0x07;

/// The header of a data frame of `len` payload bytes (as libuv writes it:
/// `HAS_DATA` only when there is data).
pub fn header(len: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    if len > 0 {
        h[0..4].copy_from_slice(&HAS_DATA.to_le_bytes());
        h[8..12].copy_from_slice(&len.to_le_bytes());
    }
    h
}

/// `bytes` framed for the channel: one frame per 4 GiB − 1 of payload.
pub fn encode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + HEADER_LEN);
    for chunk in bytes.chunks(u32::MAX as usize) {
        out.extend_from_slice(&header(chunk.len() as u32));
        out.extend_from_slice(chunk);
    }
    out
}

#[derive(Debug)]
enum State {
    Header { got: usize, buf: [u8; HEADER_LEN] },
    Xfer { left: usize, data: u32 },
    Data { left: u32 },
}

/// A streaming decoder of the frames, over any read boundaries.
#[derive(Debug)]
pub struct Decoder {
    state: State,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            state: State::Header {
                got: 0,
                buf: [0; HEADER_LEN],
            },
        }
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed IPC frame from the child: {why}"),
    )
}

impl Decoder {
    /// Decodes the raw bytes in `buf` in place: the payload bytes they
    /// hold are moved to the front. Returns `(payload bytes, handles
    /// offered)`; a transferred socket is never imported, only counted.
    pub fn decode_in_place(&mut self, buf: &mut [u8]) -> io::Result<(usize, usize)> {
        let (mut r, mut w, mut handles) = (0usize, 0usize, 0usize);
        while r < buf.len() {
            match &mut self.state {
                State::Header { got, buf: h } => {
                    let n = (HEADER_LEN - *got).min(buf.len() - r);
                    h[*got..*got + n].copy_from_slice(&buf[r..r + n]);
                    *got += n;
                    r += n;
                    if *got < HEADER_LEN {
                        continue;
                    }
                    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
                    let (flags, len, reserved2) = (word(0), word(8), word(12));
                    if flags & !VALID_FLAGS != 0 {
                        return Err(invalid("unknown flags"));
                    }
                    if reserved2 != 0 {
                        return Err(invalid("reserved field is not zero"));
                    }
                    if flags & HAS_DATA == 0 && len != 0 {
                        return Err(invalid("data length without data"));
                    }
                    if flags & XFER_IS_TCP_CONNECTION != 0 && flags & HAS_SOCKET_XFER == 0 {
                        return Err(invalid("transfer type without a transfer"));
                    }
                    self.state = if flags & HAS_SOCKET_XFER != 0 {
                        handles += 1;
                        State::Xfer {
                            left: XFER_INFO_LEN,
                            data: len,
                        }
                    } else {
                        State::Data { left: len }
                    };
                }
                State::Xfer { left, data } => {
                    let n = (*left).min(buf.len() - r);
                    r += n;
                    *left -= n;
                    if *left == 0 {
                        self.state = State::Data { left: *data };
                    }
                }
                State::Data { left } => {
                    let n = (*left as usize).min(buf.len() - r);
                    buf.copy_within(r..r + n, w);
                    r += n;
                    w += n;
                    *left -= n as u32;
                }
            }
            if let State::Data { left: 0 } = self.state {
                *self = Decoder::default();
            }
        }
        Ok((w, handles))
    }
}
