-- qwen_companion.sha256: SHA-256 (FIPS 180-4) of a string or a file, in
-- LuaJIT with the `bit` module. The installer checks the downloaded archive
-- with it on every OS, without sha256sum/shasum/certutil.

local bit = require('bit')
local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local rshift, ror, tobit = bit.rshift, bit.ror, bit.tobit

local M = {}

local K = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}
for i = 1, 64 do
  K[i] = tobit(K[i])
end

local function new_state()
  return {
    h = { tobit(0x6a09e667), tobit(0xbb67ae85), tobit(0x3c6ef372), tobit(0xa54ff53a),
      tobit(0x510e527f), tobit(0x9b05688c), tobit(0x1f83d9ab), tobit(0x5be0cd19) },
    buf = '',
    len = 0,
  }
end

local w = {}
local function block(h, s, at)
  local byte = string.byte
  for i = 1, 16 do
    local a, b, c, d = byte(s, at + (i - 1) * 4, at + (i - 1) * 4 + 3)
    w[i] = bor(bit.lshift(a, 24), bit.lshift(b, 16), bit.lshift(c, 8), d)
  end
  for i = 17, 64 do
    local x, y = w[i - 15], w[i - 2]
    local s0 = bxor(ror(x, 7), ror(x, 18), rshift(x, 3))
    local s1 = bxor(ror(y, 17), ror(y, 19), rshift(y, 10))
    w[i] = tobit(w[i - 16] + s0 + w[i - 7] + s1)
  end
  local a, b, c, d, e, f, g, hh = h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]
  for i = 1, 64 do
    local S1 = bxor(ror(e, 6), ror(e, 11), ror(e, 25))
    local ch = bxor(band(e, f), band(bnot(e), g))
    local t1 = tobit(hh + S1 + ch + K[i] + w[i])
    local S0 = bxor(ror(a, 2), ror(a, 13), ror(a, 22))
    local maj = bxor(band(a, b), band(a, c), band(b, c))
    local t2 = tobit(S0 + maj)
    hh, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + t2)
  end
  h[1], h[2], h[3], h[4] = tobit(h[1] + a), tobit(h[2] + b), tobit(h[3] + c), tobit(h[4] + d)
  h[5], h[6], h[7], h[8] = tobit(h[5] + e), tobit(h[6] + f), tobit(h[7] + g), tobit(h[8] + hh)
end

local function update(st, s)
  st.len = st.len + #s
  local data = st.buf .. s
  local n = #data - #data % 64
  for at = 1, n, 64 do
    block(st.h, data, at)
  end
  st.buf = data:sub(n + 1)
end

local function final(st)
  local bits = st.len * 8
  local pad = '\128' .. string.rep('\0', (55 - st.len) % 64)
  local len = {}
  for i = 7, 0, -1 do
    len[#len + 1] = string.char(math.floor(bits / 2 ^ (8 * i)) % 256)
  end
  update(st, pad .. table.concat(len))
  assert(st.buf == '')
  local out = {}
  for i = 1, 8 do
    out[i] = bit.tohex(st.h[i], 8)
  end
  return table.concat(out)
end

--- The lowercase hex SHA-256 of the string `s`.
function M.string(s)
  local st = new_state()
  update(st, s)
  return final(st)
end

--- The lowercase hex SHA-256 of the file at `path`, or nil and a message.
function M.file(path)
  local f, err = io.open(path, 'rb')
  if not f then
    return nil, err
  end
  local st = new_state()
  while true do
    local chunk = f:read(1024 * 1024)
    if not chunk then
      break
    end
    update(st, chunk)
  end
  f:close()
  return final(st)
end

return M
