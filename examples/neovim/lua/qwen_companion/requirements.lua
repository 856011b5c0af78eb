-- qwen_companion.requirements: the programs the companion works with and
-- the versions it was tested with, in one place (:checkhealth
-- qwen_companion compares the installed ones with these; the README and
-- :help qwen_companion-requirements say the same).

local M = {}

--- The Qwen Code CLI (`qwen --version`) the library was tested with.
M.QWEN_CODE_TESTED = '0.24.4'
--- Its npm package.
M.QWEN_CODE_PACKAGE = '@qwen-code/qwen-code'
--- The lowest Node.js major version that runs it (its package.json
--- `engines`; Node 20 cannot run qwen 0.24.4).
M.NODE_MIN_MAJOR = 22

--- The Gemini CLI (`gemini --version`) the library was tested with (npm
--- package @google/gemini-cli; the library's health report checks it).
M.GEMINI_CLI_TESTED = '0.61.0'

--- The command that installs the tested Qwen Code.
function M.qwen_install_command()
  return string.format('npm install -g %s@%s', M.QWEN_CODE_PACKAGE, M.QWEN_CODE_TESTED)
end

--- The first x.y.z in `text` as { x, y, z }, or nil.
function M.parse_version(text)
  local a, b, c = tostring(text or ''):match('(%d+)%.(%d+)%.(%d+)')
  if not a then
    return nil
  end
  return { tonumber(a), tonumber(b), tonumber(c) }
end

--- -1, 0 or 1 as version `a` is older than, equal to or newer than `b`.
function M.compare(a, b)
  for i = 1, 3 do
    if a[i] ~= b[i] then
      return a[i] < b[i] and -1 or 1
    end
  end
  return 0
end

return M
