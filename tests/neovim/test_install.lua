-- The installer (qwen_companion.install: :QwenInstall and lazy.nvim's build
-- step) against a loopback HTTP server serving the release files. Run by
-- tests/neovim/run.sh in `nvim --headless -u NONE` with the plugin of a
-- scratch clone ($QCNV_CLONE/examples/neovim) on the runtimepath, so lib/ is
-- written there. Env: QCNV_TMP (results: nv-install.json), QCNV_CLONE,
-- QCNV_URL (http://127.0.0.1:PORT; /real is the dist folder, /tampered,
-- /nosum, /noasset, /wrongver are made from it by run.sh), QCNV_DIST (the
-- dist folder), QCNV_VERSION, QCNV_TRIPLE.

local T = assert(os.getenv('QCNV_TMP'))
local CLONE = assert(os.getenv('QCNV_CLONE'))
local URL = assert(os.getenv('QCNV_URL'))
local DIST = assert(os.getenv('QCNV_DIST'))
local VERSION = assert(os.getenv('QCNV_VERSION'))
local TRIPLE = assert(os.getenv('QCNV_TRIPLE'))

local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local check = C.check
local function has(s, needle)
  return type(s) == 'string' and s:find(needle, 1, true) ~= nil
end

local ok, err = pcall(function()
  local inst = require('qwen_companion.install')
  local capi = require('qwen_companion.capi')
  local sha = require('qwen_companion.sha256')
  local PLUGIN = CLONE .. '/examples/neovim'
  local LIB = PLUGIN .. '/lib'
  local ARCHIVE = inst.archive_name(VERSION, TRIPLE)
  check('the plugin under test is the scratch clone\'s', inst.plugin_root() == PLUGIN, inst.plugin_root())

  -- pure parts
  check('triple: Linux x64, Linux arm64, macOS arm64/x64, Windows x64',
    inst.triple('Linux', 'x64') == 'x86_64-unknown-linux-gnu' and inst.triple('Linux', 'arm64') == 'aarch64-unknown-linux-gnu'
    and inst.triple('OSX', 'arm64') == 'aarch64-apple-darwin' and inst.triple('OSX', 'x64') == 'x86_64-apple-darwin'
    and inst.triple('Windows', 'x64') == 'x86_64-pc-windows-gnu')
  check('this machine\'s triple is the dist\'s ' .. TRIPLE, inst.triple() == TRIPLE, inst.triple())
  local t, terr = inst.triple('BSD', 'x64')
  check('no release for BSD x64: a message naming the platforms there are and the source build',
    t == nil and has(terr, 'no prebuilt library for BSD x64 (there are for Linux arm64, Linux x64')
    and has(terr, ':QwenInstall source (needs cargo)'), terr)
  check('archive names: .tar.gz, and .zip for Windows',
    inst.archive_name('1.2.3', 'x86_64-unknown-linux-gnu') == 'qwen-companion-1.2.3-x86_64-unknown-linux-gnu.tar.gz'
    and inst.archive_name('1.2.3', 'x86_64-pc-windows-gnu') == 'qwen-companion-1.2.3-x86_64-pc-windows-gnu.zip')
  local REL = 'https://github.com/someone/qwen-companion/releases/download/v1.2.3'
  for _, origin in ipairs({ 'https://github.com/someone/qwen-companion.git', 'https://github.com/someone/qwen-companion',
    'https://github.com/someone/qwen-companion/', 'git@github.com:someone/qwen-companion.git',
    'ssh://git@github.com/someone/qwen-companion.git', 'git@github.com:someone/qwen-companion\n' }) do
    local u, uerr = inst.release_url(origin, '1.2.3')
    check('origin ' .. vim.inspect(origin) .. ' -> the GitHub release v1.2.3', u == REL, { u, uerr })
  end
  for _, origin in ipairs({ 'https://gitlab.com/someone/qwen-companion.git', '', 'https://github.com/only-owner' }) do
    local u, uerr = inst.release_url(origin, '1.2.3')
    check('origin ' .. vim.inspect(origin) .. ': an error naming download_url and the source build', u == nil
      and has(uerr, 'is not a GitHub repository: set download_url') and has(uerr, '$QWEN_COMPANION_DOWNLOAD_URL')
      and has(uerr, ':QwenInstall source'), { u, uerr })
  end
  check('SHA256SUMS lines: plain, *binary, ./path; a missing entry is nil',
    inst.sum_for(string.rep('a', 64) .. '  x.tar.gz\n' .. string.rep('B', 64) .. ' *y.zip\n' .. string.rep('c', 64) .. '  ./z.tar.gz', 'x.tar.gz') == string.rep('a', 64)
    and inst.sum_for(string.rep('B', 64) .. ' *y.zip', 'y.zip') == string.rep('b', 64)
    and inst.sum_for(string.rep('c', 64) .. '  ./z.tar.gz', 'z.tar.gz') == string.rep('c', 64)
    and inst.sum_for(string.rep('a', 64) .. '  x.tar.gz', 'w.tar.gz') == nil)
  check('sha256 of known strings', sha.string('') == 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    and sha.string('abc') == 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  check('the clone\'s Cargo.toml version is the dist\'s', inst.crate_version(CLONE) == VERSION, inst.crate_version(CLONE))
  local m, merr = inst.method({ method = 'bogus' })
  check('an unknown method is refused', m == nil and has(merr, "unknown install method 'bogus' (prebuilt or source)"), merr)
  check('the default method is prebuilt', inst.method({}) == 'prebuilt')

  -- the origin of the clone decides the URL (no download_url)
  vim.fn.system({ 'git', '-C', CLONE, 'remote', 'set-url', 'origin', 'git@github.com:owner/qwen-companion.git' })
  local base = inst.download_base({}, CLONE, VERSION)
  check('download URL from the clone\'s git origin (ssh form)', base == 'https://github.com/owner/qwen-companion/releases/download/v' .. VERSION, base)
  vim.fn.system({ 'git', '-C', CLONE, 'remote', 'set-url', 'origin', 'https://example.org/owner/qwen-companion.git' })
  local d, derr = inst.run({})
  check('a non-GitHub origin without download_url: not installed, the error names download_url',
    d == nil and has(derr, 'https://example.org/owner/qwen-companion.git is not a GitHub repository: set download_url')
    and vim.fn.isdirectory(LIB) == 0, derr)
  vim.g.qwen_companion_download_url = 'https://example.org/files'
  check('vim.g.qwen_companion_download_url wins over the origin', inst.download_base({}, CLONE, VERSION) == 'https://example.org/files')
  vim.g.qwen_companion_download_url = nil

  -- the real dist through HTTP
  local progress = {}
  d, derr = inst.run({ download_url = URL .. '/real', progress = function(msg)
    progress[#progress + 1] = msg
  end })
  check('install from ' .. URL .. '/real: lib/ and the version', d == LIB and derr == VERSION, { d, derr, progress })
  local native = DIST .. '/native/' .. TRIPLE .. '/'
  local libname, bridge = capi.library_file_name(), require('qwen_companion.platform').bridge_file_name()
  check('lib/ holds the archive\'s library and bridge (same bytes as native/' .. TRIPLE .. ')',
    sha.file(LIB .. '/' .. libname) == sha.file(native .. libname) and sha.file(LIB .. '/' .. bridge) == sha.file(native .. bridge))
  check('the bridge is executable', vim.fn.executable(LIB .. '/' .. bridge) == 1)
  check('progress said downloading, checking and unpacking', #progress >= 3 and has(progress[1], 'downloading ' .. ARCHIVE), progress)
  check(':helptags ran on the plugin\'s doc', vim.fn.filereadable(PLUGIN .. '/doc/tags') == 1)
  local path, origin = capi.library_path()
  check('the plugin then loads lib/\'s library (first in its search order)', path == LIB .. '/' .. libname and origin == 'next to the plugin', { path, origin })
  local before = sha.file(LIB .. '/' .. libname)
  local inode = vim.loop.fs_stat(LIB .. '/' .. libname).ino

  local function untouched(name)
    local st = vim.loop.fs_stat(LIB .. '/' .. libname)
    local left = vim.fn.glob(PLUGIN .. '/lib.*', true, true)
    check(name .. ': the installed lib/ is untouched, no staging folder left',
      st and st.ino == inode and sha.file(LIB .. '/' .. libname) == before and #left == 0, left)
  end
  d, derr = inst.run({ download_url = URL .. '/tampered' })
  check('a tampered archive is refused (SHA-256 mismatch)', d == nil and has(derr, ARCHIVE .. ' does not match its SHA-256 in SHA256SUMS')
    and has(derr, 'not installed'), derr)
  untouched('tampered')
  d, derr = inst.run({ download_url = URL .. '/nosum' })
  check('an archive without a SHA256SUMS entry is refused', d == nil and has(derr, 'SHA256SUMS at ' .. URL .. '/nosum has no entry for ' .. ARCHIVE), derr)
  untouched('no checksum')
  d, derr = inst.run({ download_url = URL .. '/noasset' })
  check('no asset for this platform: says so and names the source build', d == nil and has(derr, 'no ' .. ARCHIVE .. ' at ' .. URL .. '/noasset')
    and has(derr, '404') and has(derr, ':QwenInstall source'), derr)
  untouched('no asset')
  d, derr = inst.run({ download_url = URL .. '/wrongver', version = '9.9.9' })
  check('a library of another version is refused after loading it', d == nil
    and has(derr, 'the library is version ' .. VERSION .. ', this plugin is version 9.9.9: not installed'), derr)
  untouched('wrong version')
  d, derr = inst.run({ download_url = 'http://127.0.0.1:9/' })
  check('offline (connection refused): a clear message with the fallbacks', d == nil and has(derr, 'cannot download http://127.0.0.1:9/SHA256SUMS')
    and has(derr, 'set download_url to a local folder') and has(derr, ':QwenInstall source'), derr)
  untouched('offline')
  local path_env = vim.env.PATH
  vim.env.PATH = T .. '/empty-path'
  d, derr = inst.run({ download_url = URL .. '/real' })
  local _, serr = inst.run({ method = 'source' })
  vim.env.PATH = path_env
  check('no curl: a message naming curl and the other ways', d == nil and has(derr, 'curl not found in PATH: install curl, or download'), derr)
  check('source build without cargo: a message naming rustup and the prebuilt install', has(serr, 'cargo not found in PATH: install Rust (https://rustup.rs)'), serr)
  untouched('no curl / no cargo')

  -- the source build, with a stand-in cargo (the real build is the crate's
  -- own test; here: the command, its folder, and what happens after it)
  vim.g.qwen_companion_build = 'source'
  check('vim.g.qwen_companion_build = \'source\' asks for the source build', inst.method({}) == 'source')
  vim.g.qwen_companion_build = nil
  local fake = T .. '/fakecargo'
  vim.fn.mkdir(fake, 'p')
  vim.fn.writefile({ '#!/bin/sh', 'pwd > "$0.cwd"', 'echo "$@" > "$0.args"', 'echo "   Compiling qwen-companion"',
    'if [ -n "$FAKE_CARGO_FAIL" ]; then echo "error[E0432]: unresolved import" >&2; exit 101; fi' }, fake .. '/cargo')
  vim.loop.fs_chmod(fake .. '/cargo', tonumber('755', 8))
  vim.fn.mkdir(CLONE .. '/target/release', 'p')
  for _, name in ipairs({ libname, bridge }) do
    vim.loop.fs_copyfile(native .. name, CLONE .. '/target/release/' .. name)
  end
  vim.env.PATH = fake .. ':' .. path_env
  vim.env.FAKE_CARGO_FAIL = '1'
  d, derr = inst.run({ method = 'source' })
  vim.env.FAKE_CARGO_FAIL = nil
  check('a failing cargo build: its error shown, nothing installed', d == nil and has(derr, 'cargo build failed:')
    and has(derr, 'error[E0432]: unresolved import'), derr)
  untouched('failed source build')
  d, derr = inst.run({ method = 'source' })
  vim.env.PATH = path_env
  check('source build: cargo build --release --lib --bin qc-mcp-bridge in the clone',
    vim.fn.readfile(fake .. '/cargo.args')[1] == 'build --release --lib --bin qc-mcp-bridge'
    and vim.fn.resolve(vim.fn.readfile(fake .. '/cargo.cwd')[1]) == vim.fn.resolve(CLONE), vim.fn.readfile(fake .. '/cargo.cwd'))
  check('... then target/release\'s library and bridge installed in lib/ (version checked)', d == LIB and derr == VERSION
    and sha.file(LIB .. '/' .. libname) == sha.file(native .. libname), { d, derr })
  vim.fn.delete(CLONE .. '/target', 'rf')
  inode = vim.loop.fs_stat(LIB .. '/' .. libname).ino

  -- a local folder and file:// as download_url, through :QwenInstall's async path
  d, derr = inst.run({ download_url = DIST })
  check('download_url = a local folder', d == LIB and derr == VERSION, { d, derr })
  local done
  inst.run_async({ download_url = 'file://' .. DIST }, function(dd, vv)
    done = { dd, vv }
  end)
  check('run_async returns before it is done (curl/tar/the check run in the background)', done == nil)
  vim.wait(60000, function()
    return done ~= nil
  end, 20)
  check('download_url = file://, in run_async (the :QwenInstall path)', done and done[1] == LIB and done[2] == VERSION, done)
  check('the reinstalled library is the same', sha.file(LIB .. '/' .. libname) == before)
end)
if not ok then
  check('test_install.lua ran', false, err)
end
C.finish(T .. '/nv-install.json')
