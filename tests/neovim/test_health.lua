-- :checkhealth's `Qwen Code and Node.js` section (qwen_companion.health
-- check_programs) against fake `qwen` and `node` scripts on PATH printing
-- chosen versions: too old, the tested one, newer, missing, not a version,
-- failing. Run by tests/neovim/run.sh (nvim --headless -u NONE, the plugin
-- on the runtimepath, no library needed). Writes $QCNV_TMP/nv-health.json.

local T = assert(os.getenv('QCNV_TMP'))
local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local check = C.check

local health = require('qwen_companion.health')
local req = require('qwen_companion.requirements')
local REAL_PATH = vim.env.PATH

-- a folder of fake programs: name -> { output, exit code }
local n = 0
local function fakes(progs)
  n = n + 1
  local dir = T .. '/fakebin' .. n
  vim.fn.mkdir(dir, 'p')
  for name, p in pairs(progs) do
    local f = assert(io.open(dir .. '/' .. name, 'w'))
    f:write(string.format("#!/bin/sh\nprintf '%%s\\n' '%s'\nexit %d\n", p[1], p[2] or 0))
    f:close()
    vim.loop.fs_chmod(dir .. '/' .. name, tonumber('755', 8))
  end
  return dir
end

-- check_programs with PATH = `dir` only; returns the report as {level, text, advice} lines
local function report(dir, node_cmd)
  local lines = {}
  local function rec(level)
    return function(msg, advice)
      lines[#lines + 1] = { level = level, msg = msg, advice = advice and table.concat(advice, ' | ') or '' }
    end
  end
  local r = { start = rec('start'), ok = rec('ok'), info = rec('info'), warn = rec('warn'), error = rec('error') }
  vim.env.PATH = dir
  local ok, err = pcall(health.check_programs, r, node_cmd)
  vim.env.PATH = REAL_PATH
  assert(ok, err)
  return lines
end
local function find(lines, level, needle, advice)
  for _, l in ipairs(lines) do
    if l.level == level and l.msg:find(needle, 1, true) and (not advice or l.advice:find(advice, 1, true)) then
      return true
    end
  end
  return false
end

local INSTALL = 'npm install -g @qwen-code/qwen-code@0.24.4'
check('requirements: the tested versions in one place (Qwen Code 0.24.4, Node >= 22)',
  req.QWEN_CODE_TESTED == '0.24.4' and req.NODE_MIN_MAJOR == 22 and req.qwen_install_command() == INSTALL,
  { req.QWEN_CODE_TESTED, req.NODE_MIN_MAJOR, req.qwen_install_command() })

local L = report(fakes({ node = { 'v20.11.1' }, qwen = { '0.24.3' } }))
check('node v20 (too old): an error naming Node.js 22 and Qwen Code 0.24.4',
  find(L, 'error', 'is Node.js v20.11.1: Qwen Code 0.24.4 needs Node.js 22 or later', 'nodejs.org'), L)
check('qwen 0.24.3 (older than tested): a warning with the npm command that installs 0.24.4',
  find(L, 'warn', 'qwen 0.24.3', INSTALL) and find(L, 'warn', 'is older than 0.24.4, the version the library was tested with'), L)

L = report(fakes({ node = { 'v22.12.0' }, qwen = { '0.24.4' } }))
check('node v22.12.0: OK', find(L, 'ok', 'node v22.12.0') and not find(L, 'error', 'node'), L)
check('qwen 0.24.4: OK, the tested version', find(L, 'ok', 'qwen 0.24.4') and find(L, 'ok', 'the version the library was tested with'), L)
check('the section is titled', find(L, 'start', 'Qwen Code and Node.js'), L)

L = report(fakes({ node = { 'v24.1.0' }, qwen = { '0.25.1' } }))
check('node v24 (newer): OK', find(L, 'ok', 'node v24.1.0'), L)
check('qwen 0.25.1 (newer): OK, said to be newer than the tested 0.24.4',
  find(L, 'ok', 'qwen 0.25.1') and find(L, 'ok', 'newer than 0.24.4, the version the library was tested with'), L)

L = report(fakes({}))
check('node missing: an error saying how to install Node.js 22',
  find(L, 'error', 'node: not found (Qwen Code needs Node.js 22 or later', 'Node.js 22 or later'), L)
check('qwen missing: a warning with ' .. INSTALL, find(L, 'warn', 'qwen (the Qwen Code CLI): not found', INSTALL), L)

L = report(fakes({ node = { 'v22.0.0' }, qwen = { 'no version here' } }))
check('qwen printing no version: a warning quoting it', find(L, 'warn', 'qwen --version printed "no version here": not a version'), L)

L = report(fakes({ node = { 'v22.0.0' }, qwen = { 'broken', 3 } }))
check('qwen --version failing: a warning with its exit code and output', find(L, 'warn', 'exited with 3: broken'), L)

local dir = fakes({ mynode = { 'v18.19.0' }, node = { 'v22.0.0' } })
L = report(dir, dir .. '/mynode')
check('plugins.node is the node checked (v18 there: an error)', find(L, 'error', 'is Node.js v18.19.0'), L)

check('PATH restored', vim.env.PATH == REAL_PATH)

C.finish(T .. '/nv-health.json')
