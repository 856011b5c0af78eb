-- qwen_companion.selection: the text of the visual selection (charwise,
-- linewise or blockwise) that the context reports, read without copying a
-- huge selection whole.

local api = vim.api
local bit = require('bit')

local M = {}

--- More than 16384 UTF-16 units (the library's limit), so over-long text is
--- still seen as such.
M.MAX_SELECTION_BYTES = 49200

-- Byte length of the UTF-8 character starting at byte `i` of `s`.
local function char_len(s, i)
  local b = s:byte(i)
  if not b or b < 0xC0 then
    return 1
  elseif b < 0xE0 then
    return 2
  elseif b < 0xF0 then
    return 3
  end
  return 4
end

-- Cuts `s` to at most `max` bytes on a UTF-8 character boundary.
function M.cut_utf8(s, max)
  if #s <= max then
    return s
  end
  local i = max + 1
  while i > 1 and bit.band(s:byte(i) or 0, 0xC0) == 0x80 do
    i = i - 1
  end
  return s:sub(1, i - 1)
end

--- The text of the current visual selection of `buf` (nil outside visual
--- mode), cut to MAX_SELECTION_BYTES on a character boundary.
function M.visual_text(buf)
  local mode = api.nvim_get_mode().mode:sub(1, 1)
  if mode ~= 'v' and mode ~= 'V' and mode ~= '\22' then
    return nil
  end
  local a, b = vim.fn.getpos('v'), vim.fn.getpos('.')
  local l1, c1, l2, c2 = a[2], a[3], b[2], b[3]
  if l1 > l2 or (l1 == l2 and c1 > c2) then
    l1, c1, l2, c2 = l2, c2, l1, c1
  end
  -- Read at most about MAX_SELECTION_BYTES (a huge selection is never copied whole).
  local lines, size, last = {}, 0, l1 - 1
  while last < l2 and size <= M.MAX_SELECTION_BYTES do
    local chunk = api.nvim_buf_get_lines(buf, last, math.min(l2, last + 256), false)
    for _, l in ipairs(chunk) do
      lines[#lines + 1] = l
      size = size + #l + 1
    end
    last = last + #chunk
    if #chunk == 0 then
      break
    end
  end
  local complete = last >= l2
  local text
  if mode == 'V' then
    text = table.concat(lines, '\n')
  elseif mode == 'v' then
    if complete then
      local tail = lines[#lines]
      local keep = c2 + char_len(tail, c2) - 1
      local nl = c2 > #tail and l2 < api.nvim_buf_line_count(buf) -- selection includes the line break
      lines[#lines] = tail:sub(1, keep)
      if #lines == 1 then
        lines[1] = lines[1]:sub(c1)
      end
      text = table.concat(lines, '\n') .. (nl and '\n' or '')
      if #lines > 1 then
        text = text:sub(c1)
      end
    else
      lines[1] = lines[1]:sub(c1)
      text = table.concat(lines, '\n')
    end
  else -- blockwise: the byte columns between both corners, line by line
    local left, right = math.min(c1, c2), math.max(c1, c2)
    for i, l in ipairs(lines) do
      lines[i] = l:sub(left, right + char_len(l, right) - 1)
    end
    text = table.concat(lines, '\n')
  end
  return M.cut_utf8(text, M.MAX_SELECTION_BYTES)
end

return M
