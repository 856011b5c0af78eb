-- Unit tests of lua/qwen_companion/platform.lua (tests/neovim/run.sh): the
-- file names, paths, shell lines and event watching of every OS, each
-- checked by passing the OS name (jit.os values), plus the bridge install
-- and lookup of plugins.lua for Windows names. No library is loaded.
-- Writes $QCNV_TMP/nv-platform.json ({checks = ...}) and quits.

local T = assert(os.getenv('QCNV_TMP'))
local uv = vim.uv or vim.loop
local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local check = C.check
local function eq(name, got, want)
  check(name, vim.deep_equal(got, want), { got = got, want = want })
end

local ok, err = pcall(function()
  local p = require('qwen_companion.platform')

  for _, c in ipairs({
    { 'Linux', 'libqwen_companion.so', 'qc-mcp-bridge' },
    { 'OSX', 'libqwen_companion.dylib', 'qc-mcp-bridge' },
    { 'Windows', 'qwen_companion.dll', 'qc-mcp-bridge.exe' },
    { 'BSD', 'libqwen_companion.so', 'qc-mcp-bridge' },
  }) do
    eq('file names on ' .. c[1], { p.library_file_name(c[1]), p.bridge_file_name(c[1]) }, { c[2], c[3] })
  end
  eq('capi.library_file_name follows the OS', require('qwen_companion.capi').library_file_name('Windows'), 'qwen_companion.dll')
  eq('this OS by default', p.library_file_name(), p.library_file_name(jit.os))
  local capi = require('qwen_companion.capi')
  local nolib, lerr = capi.load('qwen_companion_not_here')
  check('a library loaded by name that is missing: the error names the file and where it was looked for', nolib == nil
    and lerr:find('looked for ' .. p.library_file_name() .. ' next to the plugin: ', 1, true)
    and lerr:find('install it with :QwenInstall', 1, true)
    and lerr:find(capi.bundled_library_candidates()[1], 1, true) and lerr:find("dynamic linker's search path", 1, true), lerr)

  eq('absolute paths on Linux', { p.is_absolute('/a', 'Linux'), p.is_absolute('C:\\a', 'Linux'), p.is_absolute('a', 'Linux') },
    { true, false, false })
  eq('absolute paths on Windows',
    { p.is_absolute('C:\\a', 'Windows'), p.is_absolute('c:/a', 'Windows'), p.is_absolute('\\\\srv\\s', 'Windows'),
      p.is_absolute('C:a', 'Windows'), p.is_absolute('qwen_companion', 'Windows') },
    { true, true, true, false, false })
  eq('dirname', { p.dirname('C:\\q\\x.dll', 'Windows'), p.dirname('C:/q/x.dll', 'Windows'), p.dirname('C:\\x.dll', 'Windows'),
    p.dirname('/q/x.so', 'Linux') }, { 'C:\\q', 'C:/q', 'C:\\', '/q' })
  eq('join', { p.join('/a', 'b', 'Linux'), p.join('C:\\a', 'b', 'Windows'), p.join('C:\\a\\', 'b', 'Windows') },
    { '/a/b', 'C:\\a\\b', 'C:\\a\\b' })

  eq('shell: auto is PowerShell on Windows', p.shell_for('auto', 'Windows', '/bin/bash'), 'powershell')
  eq('shell: auto follows $SHELL elsewhere',
    { p.shell_for(nil, 'Linux', '/usr/bin/fish'), p.shell_for('auto', 'OSX', '/bin/zsh'), p.shell_for('', 'Linux', '/usr/bin/pwsh') },
    { 'fish', 'posix', 'powershell' })
  eq('shell: an explicit one wins', { p.shell_for('cmd', 'Linux'), p.shell_for('POSIX', 'Windows') }, { 'cmd', 'posix' })
  local s, serr = p.shell_for('tcsh', 'Linux')
  check('shell: an unknown one is refused', s == nil and serr:find("unknown terminal shell 'tcsh'", 1, true), serr)

  local env = { QWEN_CODE_IDE_SERVER_PORT = '4711', QWEN_CODE_IDE_WORKSPACE_PATH = 'C:\\a b;D:\\c' }
  eq('posix lines', p.env_lines(env, 'posix'),
    { "export QWEN_CODE_IDE_SERVER_PORT='4711'", "export QWEN_CODE_IDE_WORKSPACE_PATH='C:\\a b;D:\\c'" })
  eq('fish lines', p.env_lines(env, 'fish'),
    { "set -gx QWEN_CODE_IDE_SERVER_PORT '4711'", "set -gx QWEN_CODE_IDE_WORKSPACE_PATH 'C:\\\\a b;D:\\\\c'" })
  eq('powershell lines', p.env_lines(env, 'powershell'),
    { "$env:QWEN_CODE_IDE_SERVER_PORT = '4711'", "$env:QWEN_CODE_IDE_WORKSPACE_PATH = 'C:\\a b;D:\\c'" })
  eq('cmd lines', p.env_lines(env, 'cmd'),
    { 'set "QWEN_CODE_IDE_SERVER_PORT=4711"', 'set "QWEN_CODE_IDE_WORKSPACE_PATH=C:\\a b;D:\\c"' })
  eq('powershell doubles every single quote', p.env_line('K', "it's \226\128\152x\226\128\153 $a `b", 'powershell'),
    "$env:K = 'it''s \226\128\152\226\128\152x\226\128\153\226\128\153 $a `b'")
  eq('cmd takes & | < > ^ ; literally inside the quotes', p.env_line('K', "a ^& b | <c>; d' $e", 'cmd'),
    'set "K=a ^& b | <c>; d\' $e"')
  for _, bad in ipairs({ { 'a\nb', 'line break' }, { 'a"b', 'double quote' }, { '50%', 'percent' } }) do
    local line, lerr = p.env_line('K', bad[1], 'cmd')
    check('cmd refuses a value with a ' .. bad[2], line == nil and lerr:find('cmd cannot set K', 1, true)
      and lerr:find(bad[2], 1, true) and lerr:find('PowerShell', 1, true), lerr)
  end
  local lines, lerr = p.env_lines({ A = 'ok', B = 'x\ny' }, 'cmd')
  check('env_lines gives the first error', lines == nil and lerr:find('cmd cannot set B', 1, true), lerr)
  for _, name in ipairs({ '', '1A', 'A B', 'A=B', '$A' }) do
    local line, nerr = p.env_line(name, 'v', 'posix')
    check('a bad name is refused: ' .. vim.inspect(name), line == nil and nerr:find('not an environment variable name', 1, true), nerr)
  end
  local line, uerr = p.env_line('K', 'v', 'csh')
  check('an unknown shell is refused', line == nil and uerr:find("unknown shell 'csh'", 1, true), uerr)

  -- posix lines run by sh give back the value
  local hostile = "it's a \"test\" ; $HOME `id` %PATH% ^& | <x> \\ ! *\nline two"
  local out = vim.fn.system({ 'sh', '-c', p.env_line('QC_V', hostile, 'posix') .. '\nprintf %s "$QC_V"' })
  eq('a hostile value survives sh', out, hostile)

  eq('events: poll on Linux and macOS, a timer on Windows',
    { p.event_watch_method('Linux'), p.event_watch_method('OSX'), p.event_watch_method('Windows') },
    { 'poll', 'poll', 'timer' })

  -- plugins.lua with Windows names: the bridge next to the library, and its install
  local plugins = require('qwen_companion.plugins')
  eq('bridge next to a Windows library', plugins.bridge_next_to('C:\\q\\qwen_companion.dll', 'Windows'),
    'C:\\q\\qc-mcp-bridge.exe')
  eq('no bridge for a library loaded by name', plugins.bridge_next_to('qwen_companion', 'Windows'), nil)
  eq('bridge next to a Linux library', plugins.bridge_next_to('/q/libqwen_companion.so', 'Linux'), '/q/qc-mcp-bridge')
  local src = T .. '/platform-bridge-src'
  local f = assert(io.open(src, 'w'))
  f:write('#!/bin/sh\nexit 0\n')
  f:close()
  local home = T .. '/platform-qwen-home'
  local dst, ierr = plugins.install_bridge(src, home)
  eq('install_bridge copies to <qwen home>/companion/bin/' .. p.bridge_file_name(), dst,
    home .. '/companion/bin/' .. p.bridge_file_name())
  check('the copy is executable', dst and uv.fs_access(dst, 'X'), ierr)
  local missing, merr = plugins.install_bridge(T .. '/none', home, 'Windows')
  check('a missing bridge names the .exe on Windows', missing == nil and merr:find('no qc-mcp-bridge.exe at', 1, true), merr)

  -- watch_events on this OS (a pipe's read end), and the Windows timer path
  local fds = assert(uv.pipe({ nonblock = true }, { nonblock = true }))
  local fired = 0
  local w = assert(p.watch_events(fds.read, function()
    fired = fired + 1
  end))
  assert(uv.fs_write(fds.write, 'x'))
  vim.wait(2000, function()
    return fired > 0
  end, 5)
  check('watch_events: a poll fires when the descriptor is readable', fired > 0, fired)
  w:stop()
  w:close()
  local ticks = 0
  local t = assert(p.watch_events(-1, function()
    ticks = ticks + 1
  end, 'Windows'))
  vim.wait(2000, function()
    return ticks >= 2
  end, 5)
  check('watch_events on Windows: a timer calls back repeatedly (handle -1 untouched)', ticks >= 2 and t:get_repeat() == p.WINDOWS_EVENT_INTERVAL_MS, ticks)
  t:stop()
  t:close()
end)
check('test_platform.lua ran to the end', ok, err)
C.finish(T .. '/nv-platform.json')
