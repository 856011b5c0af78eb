-- qwen_companion.install: puts the library and qc-mcp-bridge in `lib/` of
-- the plugin folder (the first place capi.lua looks), from the release
-- archive of this platform (default) or built from source (when asked).
--
--   prebuilt: the archive qwen-companion-<version>-<triple>.tar.gz (.zip on
--     Windows) and SHA256SUMS from the download URL: setup{ download_url },
--     vim.g.qwen_companion_download_url, $QWEN_COMPANION_DOWNLOAD_URL, else
--     the GitHub release v<version> of the repository the plugin was cloned
--     from (its git origin). <version> is the clone's Cargo.toml version.
--     The download URL may also be file:// or a local folder.
--     Fetched with curl, checked against SHA256SUMS (a wrong or missing
--     checksum refuses the archive), unpacked with tar.
--   source: `cargo build --release --lib --bin qc-mcp-bridge` in the clone.
--
-- Either way the two files are staged in a new folder, their library is
-- loaded by a child Neovim that must report the expected version and ABI,
-- and only then does the folder replace `lib/` (a rename). Any failure
-- leaves the existing `lib/` as it was.
--
-- Waiting for curl/tar/cargo: inside lazy.nvim's build task the task is
-- suspended (the UI keeps running) and progress goes to lazy's log with
-- coroutine.yield; inside `run_async`'s own coroutine it resumes on exit;
-- elsewhere vim.wait.

local platform = require('qwen_companion.platform')
local uv = vim.uv or vim.loop

local M = {}

--- The build command of a source build (run in the repository).
M.CARGO_ARGS = { 'cargo', 'build', '--release', '--lib', '--bin', 'qc-mcp-bridge' }
--- The platforms with a release archive: jit.os/jit.arch -> Rust target.
M.TRIPLES = {
  Linux = { x64 = 'x86_64-unknown-linux-gnu', arm64 = 'aarch64-unknown-linux-gnu' },
  OSX = { x64 = 'x86_64-apple-darwin', arm64 = 'aarch64-apple-darwin' },
  Windows = { x64 = 'x86_64-pc-windows-gnu' },
}
local TIMEOUT_MS = { download = 10 * 60 * 1000, tar = 5 * 60 * 1000, cargo = 60 * 60 * 1000, probe = 60 * 1000 }

local function join(...)
  local p = select(1, ...)
  for i = 2, select('#', ...) do
    p = platform.join(p, (select(i, ...)))
  end
  return p
end

--- The plugin folder (examples/neovim of the clone).
function M.plugin_root()
  return require('qwen_companion.capi').plugin_root()
end

--- The repository (crate) root the plugin folder belongs to, or nil when
--- the plugin is not `examples/neovim` of a checkout.
function M.repo_root(plugin_root)
  local root = vim.fn.fnamemodify(plugin_root or M.plugin_root(), ':h:h')
  if vim.fn.filereadable(join(root, 'Cargo.toml')) == 1 then
    return root
  end
  return nil
end

--- The Rust target of the release archive for `os_name`/`arch` (jit.os /
--- jit.arch by default), or nil and a message naming the platforms that
--- have one and the source build.
function M.triple(os_name, arch)
  os_name, arch = os_name or jit.os, arch or jit.arch
  local t = M.TRIPLES[os_name] and M.TRIPLES[os_name][arch]
  if t then
    return t
  end
  local have = {}
  for o, arches in pairs(M.TRIPLES) do
    for a in pairs(arches) do
      have[#have + 1] = o .. ' ' .. a
    end
  end
  table.sort(have)
  return nil, string.format('no prebuilt library for %s %s (there are for %s): build it from source with '
    .. ':QwenInstall source (needs cargo), or set setup{ lib } to a library you built', os_name, arch,
    table.concat(have, ', '))
end

--- The release archive's file name.
function M.archive_name(version, triple)
  local ext = triple:find('windows', 1, true) and '.zip' or '.tar.gz'
  return string.format('qwen-companion-%s-%s%s', version, triple, ext)
end

--- The `version` of the [package] in `<root>/Cargo.toml`, or nil and a message.
function M.crate_version(root)
  local path = join(root, 'Cargo.toml')
  local ok, lines = pcall(vim.fn.readfile, path)
  if not ok or #lines == 0 then
    return nil, 'cannot read ' .. path
  end
  local section
  for _, l in ipairs(lines) do
    local s = l:match('^%s*%[([^%]]+)%]')
    if s then
      section = s
    elseif section == 'package' then
      local v = l:match('^%s*version%s*=%s*"([^"]+)"')
      if v then
        return v
      end
    end
  end
  return nil, 'no [package] version in ' .. path
end

--- The GitHub release folder of `version` for a git remote URL
--- (https://github.com/OWNER/REPO(.git), git@github.com:OWNER/REPO(.git),
--- ssh://git@github.com/OWNER/REPO(.git)), or nil and a message naming
--- download_url.
function M.release_url(origin, version)
  local url = vim.trim(origin or '')
  local path = url:match('^https?://github%.com/(.+)$') or url:match('^git@github%.com:(.+)$')
    or url:match('^ssh://git@github%.com/(.+)$') or url:match('^git://github%.com/(.+)$')
  if path then
    path = path:gsub('/+$', ''):gsub('%.git$', '')
    local owner, repo = path:match('^([%w%.%-_]+)/([%w%.%-_]+)$')
    if owner then
      return string.format('https://github.com/%s/%s/releases/download/v%s', owner, repo, version)
    end
  end
  return nil, string.format("the plugin's git origin %s is not a GitHub repository: set download_url "
    .. '(setup{ download_url }, vim.g.qwen_companion_download_url or $QWEN_COMPANION_DOWNLOAD_URL) to the '
    .. 'folder holding the release archives and SHA256SUMS, or build from source with :QwenInstall source',
    url == '' and '(none)' or url)
end

local function setting_download_url(opts)
  local candidates = { opts.download_url, vim.g.qwen_companion_download_url, os.getenv('QWEN_COMPANION_DOWNLOAD_URL') }
  for i = 1, 3 do -- not ipairs: a nil must not end the search
    local v = candidates[i]
    if type(v) == 'string' and v ~= '' then
      return v
    end
  end
  local loaded = package.loaded['qwen_companion']
  local v = type(loaded) == 'table' and loaded.config and loaded.config.download_url
  if type(v) == 'string' and v ~= '' then
    return v
  end
  return nil
end

---------------------------------------------------------------------------
-- running programs (download_base, below, asks git)
---------------------------------------------------------------------------

local function lazy_task()
  local la = package.loaded['lazy.async']
  if coroutine.running() and la and type(la.running) == 'function' then
    local a = la.running()
    if a and type(a.suspend) == 'function' and type(a.resume) == 'function' then
      return a
    end
  end
  return nil
end

--- Says `msg`: to lazy.nvim's task log inside its build, else to `opts.progress`.
local function progress(opts, msg)
  if lazy_task() then
    coroutine.yield(msg)
  elseif opts.progress then
    opts.progress(msg)
  end
end

--- A table of output lines and the on_stdout/on_stderr callback that fills
--- it: a chunk's first item continues the previous chunk's last (partial)
--- line of the same stream; `collect()` flushes the partial lines.
function M.line_collector()
  local lines, partial = {}, {}
  local function flush(stream)
    if partial[stream] and partial[stream] ~= '' then
      lines[#lines + 1] = partial[stream]
    end
    partial[stream] = nil
  end
  return lines, function(_, data, stream)
    if data == nil then
      flush('stdout')
      flush('stderr')
      return
    end
    stream = stream or 'stdout'
    for i, l in ipairs(data) do
      if i == 1 then
        partial[stream] = (partial[stream] or '') .. l
      else
        flush(stream)
        partial[stream] = l
      end
    end
  end
end

--- Runs `argv` and waits for it. Returns the exit code (nil when it could
--- not start or timed out), its output (stdout then stderr) and a message.
function M.exec(argv, opts)
  opts = opts or {}
  if vim.fn.executable(argv[1]) ~= 1 then
    return nil, '', argv[1] .. ' not found in PATH'
  end
  local code, waker = nil, nil
  local out, collect = M.line_collector()
  local ok, job = pcall(vim.fn.jobstart, argv, {
    cwd = opts.cwd,
    env = opts.env,
    on_stdout = collect,
    on_stderr = collect,
    on_exit = function(_, c)
      code = c
      collect() -- the last partial lines
      if waker then
        waker()
      end
    end,
  })
  if not ok or job <= 0 then
    return nil, '', 'cannot run ' .. argv[1] .. ': ' .. tostring(job)
  end
  local limit = opts.timeout or 60000
  local lazy = lazy_task()
  local co, is_main = coroutine.running()
  if is_main == true then
    co = nil -- Lua 5.2 style main thread
  end
  if lazy then
    local timer = uv.new_timer()
    local expired = false
    timer:start(limit, 0, vim.schedule_wrap(function()
      expired = code == nil
      lazy:resume()
    end))
    waker = vim.schedule_wrap(function()
      lazy:resume()
    end)
    while code == nil and not expired do
      lazy:suspend()
    end
    timer:stop()
    timer:close()
  elseif co and opts.own_coroutine then
    local timer = uv.new_timer()
    local resumed = false
    local function wake()
      if not resumed then
        resumed = true
        timer:stop()
        vim.schedule(function()
          assert(coroutine.resume(co))
        end)
      end
    end
    waker = wake
    timer:start(limit, 0, wake)
    if code == nil then
      coroutine.yield()
    end
    if not timer:is_closing() then
      timer:close()
    end
  else
    vim.wait(limit, function()
      return code ~= nil
    end, 50)
  end
  if code == nil then
    pcall(vim.fn.jobstop, job)
    return nil, table.concat(out, '\n'), string.format('%s did not finish within %d s', argv[1], limit / 1000)
  end
  return code, table.concat(out, '\n')
end

---------------------------------------------------------------------------
-- files
---------------------------------------------------------------------------

local function is_url(s)
  return s:match('^https?://') ~= nil
end

local function local_path(base)
  local p = base:match('^file://(.*)$')
  if p then
    if jit.os == 'Windows' and p:match('^/%a:') then
      p = p:sub(2)
    end
    return p
  end
  if platform.is_absolute(base) then
    return base
  end
  return nil
end

local function rmtree(path)
  if path and (vim.fn.isdirectory(path) == 1 or vim.fn.filereadable(path) == 1) then
    vim.fn.delete(path, 'rf')
  end
end

--- Fetches `<base>/<file>` to `dest`. Returns true, or nil and a message.
function M.fetch(base, file, dest, opts)
  local src = base:gsub('/+$', '') .. '/' .. file
  if is_url(base) then
    local code, out, err = M.exec({ 'curl', '--fail', '--silent', '--show-error', '--location', '--retry', '2',
      '--connect-timeout', '20', '--output', dest, src }, { timeout = TIMEOUT_MS.download, own_coroutine = opts.own_coroutine })
    if code == 0 then
      return true
    end
    if code == nil and err and err:find('not found in PATH', 1, true) then
      return nil, 'curl not found in PATH: install curl, or download ' .. src .. ' and put the library and '
        .. platform.bridge_file_name() .. ' in ' .. join(M.plugin_root(), 'lib') .. ', or build from source with :QwenInstall source'
    end
    local lines = vim.split(vim.trim(out), '\n')
    out = lines[#lines] or ''
    if code == 22 then
      return nil, string.format('no %s at %s (%s)', file, base, out)
    end
    return nil, string.format('cannot download %s: %s (check the network, set download_url to a local '
      .. 'folder of the release files, or build from source with :QwenInstall source)', src, vim.trim(out ~= '' and out or tostring(err)))
  end
  local dir = local_path(base)
  if not dir then
    return nil, string.format('download_url %s is neither http(s)://, file:// nor an absolute folder', base)
  end
  local from = join(dir, file)
  if vim.fn.filereadable(from) ~= 1 then
    return nil, string.format('no %s at %s', file, base)
  end
  local ok, err = uv.fs_copyfile(from, dest)
  if not ok then
    return nil, 'cannot copy ' .. from .. ': ' .. tostring(err)
  end
  return true
end

--- The checksum of `file` in a SHA256SUMS text ("<hex>  <path>" lines;
--- `*` binary marks and a leading `./` accepted), or nil.
function M.sum_for(sums_text, file)
  for line in (sums_text .. '\n'):gmatch('([^\n]*)\n') do
    local hex, name = line:match('^(%x+)%s+%*?(.-)%s*$')
    if hex and #hex == 64 and (name == file or name == './' .. file) then
      return hex:lower()
    end
  end
  return nil
end

--- Asks a child Neovim to load the library at `path` and report
--- `qc_version()` and `qc_abi_version()`. Returns version, abi, or nil and a message.
function M.probe(path, opts)
  local script = table.concat({
    "local ffi = require('ffi')",
    'ffi.cdef[[const char *qc_version(void); uint32_t qc_abi_version(void);]]',
    'local ok, lib = pcall(ffi.load, vim.env.QC_PROBE_LIB)',
    "if not ok then io.stdout:write('ERR ' .. tostring(lib)) else",
    "io.stdout:write('VERSION ' .. ffi.string(lib.qc_version()) .. ' ABI ' .. tonumber(lib.qc_abi_version())) end",
  }, ' ')
  local code, out, err = M.exec({ vim.v.progpath, '--headless', '-u', 'NONE', '-i', 'NONE', '-n',
    '-c', 'lua ' .. script, '-c', 'qa!' }, { timeout = TIMEOUT_MS.probe, own_coroutine = opts and opts.own_coroutine,
    env = { QC_PROBE_LIB = path } })
  if code == nil then
    return nil, 'cannot check the library: ' .. tostring(err)
  end
  local v, abi = out:match('VERSION (%S+) ABI (%d+)')
  if v then
    return v, tonumber(abi)
  end
  return nil, 'cannot load ' .. path .. ': ' .. vim.trim(out:gsub('^.*ERR ', ''))
end

--- Moves the staged folder (holding the library and the bridge) to `lib`
--- after checking its library's version and ABI. Returns the lib folder, or
--- nil and a message (the existing lib/ untouched).
local function commit(stage, lib_dir, version, opts)
  local capi = require('qwen_companion.capi')
  local lib = join(stage, capi.library_file_name())
  progress(opts, 'checking the library')
  local got, abi = M.probe(lib, opts)
  if not got then
    return nil, abi
  end
  if abi ~= capi.ABI_VERSION then
    return nil, string.format('the library has ABI %d, this plugin needs ABI %d (library version %s): not installed',
      abi, capi.ABI_VERSION, got)
  end
  if version and got ~= version then
    return nil, string.format('the library is version %s, this plugin is version %s: not installed', got, version)
  end
  for _, left in ipairs(vim.fn.glob(lib_dir .. '.old-*', true, true)) do
    rmtree(left) -- an earlier install's, once its library is no longer in use (Windows)
  end
  local old = lib_dir .. '.old-' .. uv.os_getpid()
  if vim.fn.isdirectory(lib_dir) == 1 then
    local ok, err = uv.fs_rename(lib_dir, old)
    if not ok then
      return nil, string.format('cannot replace %s (%s): a library in use cannot be replaced on this OS; '
        .. 'restart Neovim and run :QwenInstall again', lib_dir, tostring(err))
    end
  end
  local ok, err = uv.fs_rename(stage, lib_dir)
  if not ok then
    if vim.fn.isdirectory(old) == 1 then
      uv.fs_rename(old, lib_dir)
    end
    return nil, 'cannot move the new library to ' .. lib_dir .. ': ' .. tostring(err)
  end
  rmtree(old) -- fails on Windows while the old library is loaded: the next install removes it
  return lib_dir, got
end

local function new_stage(root)
  local stage = join(root, string.format('lib.new-%d-%d', uv.os_getpid(), uv.hrtime() % 1000000))
  rmtree(stage)
  if vim.fn.mkdir(stage, 'p') ~= 1 then
    return nil, 'cannot create ' .. stage
  end
  return stage
end

local function copy_pair(from_dir, stage, os_name)
  local capi = require('qwen_companion.capi')
  for _, name in ipairs({ capi.library_file_name(os_name), platform.bridge_file_name(os_name) }) do
    local src = join(from_dir, name)
    if vim.fn.filereadable(src) ~= 1 then
      return nil, 'no ' .. name .. ' in ' .. from_dir
    end
    local ok, err = uv.fs_copyfile(src, join(stage, name))
    if not ok then
      return nil, 'cannot copy ' .. src .. ': ' .. tostring(err)
    end
    uv.fs_chmod(join(stage, name), tonumber('755', 8))
  end
  return true
end

---------------------------------------------------------------------------
-- the two ways
---------------------------------------------------------------------------

--- Where the release files of `version` are: the download_url setting,
--- else the GitHub release of the git origin of `repo`. Returns the base
--- URL (or folder), or nil and a message.
function M.download_base(opts, repo, version)
  local base = setting_download_url(opts)
  if base then
    return base
  end
  local code, out = M.exec({ 'git', '-C', repo, 'config', '--get', 'remote.origin.url' }, { timeout = 10000 })
  return M.release_url(code == 0 and out or '', version)
end

--- Downloads, checks and installs the release archive of this platform.
function M.prebuilt(opts)
  local plugin_root = opts.plugin_root or M.plugin_root()
  local repo = opts.repo_root or M.repo_root(plugin_root)
  local version, verr = opts.version, nil
  if not version then
    if not repo then
      return nil, 'cannot tell the plugin\'s version: ' .. plugin_root .. ' is not examples/neovim of a '
        .. 'qwen-companion checkout (put the library and the bridge in ' .. join(plugin_root, 'lib') .. ' yourself)'
    end
    version, verr = M.crate_version(repo)
    if not version then
      return nil, verr
    end
  end
  local triple, terr = M.triple(opts.os, opts.arch)
  if not triple then
    return nil, terr
  end
  local base, berr = M.download_base(opts, repo or plugin_root, version)
  if not base then
    return nil, berr
  end
  local file = M.archive_name(version, triple)
  local stage, serr = new_stage(plugin_root)
  if not stage then
    return nil, serr
  end
  local function fail(msg)
    rmtree(stage)
    return nil, msg
  end
  local dl = join(stage, 'download')
  vim.fn.mkdir(dl, 'p')
  progress(opts, 'downloading ' .. file .. ' from ' .. base)
  local ok, err = M.fetch(base, 'SHA256SUMS', join(dl, 'SHA256SUMS'), opts)
  if not ok then
    return fail(err)
  end
  ok, err = M.fetch(base, file, join(dl, file), opts)
  if not ok then
    return fail(err .. ' (is there a release archive for ' .. triple .. '? else build from source with :QwenInstall source)')
  end
  local sums = table.concat(vim.fn.readfile(join(dl, 'SHA256SUMS'), 'b'), '\n')
  local want = M.sum_for(sums, file)
  if not want then
    return fail('SHA256SUMS at ' .. base .. ' has no entry for ' .. file .. ': not installed')
  end
  local got = require('qwen_companion.sha256').file(join(dl, file))
  if got ~= want then
    return fail(string.format('%s does not match its SHA-256 in SHA256SUMS (got %s, expected %s): not installed',
      file, tostring(got), want))
  end
  progress(opts, 'unpacking ' .. file)
  local code, out, xerr = M.exec({ 'tar', '-xf', join(dl, file), '-C', dl }, { timeout = TIMEOUT_MS.tar, own_coroutine = opts.own_coroutine })
  if code ~= 0 then
    return fail('cannot unpack ' .. file .. ' with tar: ' .. vim.trim(out ~= '' and out or tostring(xerr)))
  end
  local top = join(dl, (file:gsub('%.tar%.gz$', ''):gsub('%.zip$', '')))
  ok, err = copy_pair(top, stage, opts.os)
  rmtree(dl)
  if not ok then
    return fail(file .. ': ' .. err)
  end
  local lib_dir, installed = commit(stage, join(plugin_root, 'lib'), version, opts)
  if not lib_dir then
    return fail(installed)
  end
  return lib_dir, installed
end

--- Builds the library and the bridge with cargo in the repository and
--- installs them.
function M.source(opts)
  local plugin_root = opts.plugin_root or M.plugin_root()
  local repo = opts.repo_root or M.repo_root(plugin_root)
  if not repo then
    return nil, plugin_root .. ' is not examples/neovim of a qwen-companion checkout: there is nothing to build'
  end
  if vim.fn.executable('cargo') ~= 1 then
    return nil, 'cargo not found in PATH: install Rust (https://rustup.rs) to build from source, or install '
      .. 'the prebuilt library with :QwenInstall'
  end
  progress(opts, 'building: ' .. table.concat(M.CARGO_ARGS, ' ') .. ' (a few minutes)')
  local code, out, err = M.exec(M.CARGO_ARGS, { cwd = repo, timeout = TIMEOUT_MS.cargo, own_coroutine = opts.own_coroutine })
  if code ~= 0 then
    local tail = vim.split(out, '\n')
    return nil, 'cargo build failed: ' .. (code and table.concat(vim.list_slice(tail, math.max(1, #tail - 15)), '\n') or tostring(err))
  end
  local stage, serr = new_stage(plugin_root)
  if not stage then
    return nil, serr
  end
  local ok, cerr = copy_pair(join(repo, 'target', 'release'), stage)
  if not ok then
    rmtree(stage)
    return nil, cerr
  end
  local lib_dir, installed = commit(stage, join(plugin_root, 'lib'), M.crate_version(repo), opts)
  if not lib_dir then
    rmtree(stage)
    return nil, installed
  end
  return lib_dir, installed
end

--- What to do: `opts.method` ('prebuilt' or 'source'), else
--- vim.g.qwen_companion_build, else $QWEN_COMPANION_BUILD, else 'prebuilt'.
function M.method(opts)
  local m = opts and opts.method or vim.g.qwen_companion_build or os.getenv('QWEN_COMPANION_BUILD')
  if m == nil or m == '' then
    return 'prebuilt'
  end
  if m ~= 'prebuilt' and m ~= 'source' then
    return nil, "unknown install method '" .. tostring(m) .. "' (prebuilt or source)"
  end
  return m
end

--- Installs the library and the bridge into lib/ of the plugin folder and
--- writes the help tags. Returns the lib folder and the installed version,
--- or nil and a message. opts: method, download_url, plugin_root,
--- progress(msg), os/arch (tests), own_coroutine.
function M.run(opts)
  opts = opts or {}
  local method, merr = M.method(opts)
  if not method then
    return nil, merr
  end
  local dir, v = M[method](opts)
  if dir then
    local doc = join(opts.plugin_root or M.plugin_root(), 'doc')
    pcall(vim.cmd, 'helptags ' .. vim.fn.fnameescape(doc))
  end
  return dir, v
end

--- `run` in a coroutine of its own (Neovim stays usable while curl, tar or
--- cargo run); `done(dir, version_or_error)` on the main loop at the end.
function M.run_async(opts, done)
  opts = vim.tbl_extend('force', opts or {}, { own_coroutine = true })
  local co = coroutine.create(function()
    local ok, dir, v = pcall(M.run, opts)
    if not ok then
      dir, v = nil, dir
    end
    vim.schedule(function()
      done(dir, v)
    end)
  end)
  local ok, err = coroutine.resume(co)
  if not ok then
    done(nil, err)
  end
end

--- lazy.nvim's build step (examples/neovim/build.lua): raises the error so
--- that lazy reports the build as failed.
function M.build()
  local dir, v = M.run({})
  if not dir then
    error('qwen-companion: ' .. v, 0)
  end
  local msg = 'qwen-companion: installed version ' .. v .. ' in ' .. dir
  if lazy_task() then
    coroutine.yield(msg)
  else
    vim.notify(msg)
  end
  return dir, v
end

return M
