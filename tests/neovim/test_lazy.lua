-- The lazy.nvim spec of examples/neovim/README.md, run the way lazy.nvim
-- runs it, on $QCNV_LAZY: a copy of the repository as lazy.nvim clones it
-- (examples/neovim, Cargo.toml, a git origin on GitHub; no library).
-- tests/neovim/run.sh runs this file twice:
--
-- QCNV_LAZY_PHASE=build (nvim --headless -u NONE --noplugin -c 'luafile …'):
--   lazy.nvim's build task for a `build` string ending in .lua:
--   loadfile(plugin.dir .. '/' .. build) run in a coroutine of lazy's task
--   scheduler, emulated by a small `lazy.async` (running(), suspend(),
--   resume(); a yielded string is a line of the task's log, as in
--   lua/lazy/async.lua and lua/lazy/manage/task/init.lua). The plugin is not
--   on the runtimepath then (lazy loads it for `:Cmd` builds only). The
--   release files come from $QWEN_COMPANION_DOWNLOAD_URL (the loopback
--   server). Checks: lib/ holds the library and the bridge, the task log.
--
-- QCNV_LAZY_PHASE=start (nvim --headless -u test_lazy.lua --noplugin): this
--   file is the init file, as lazy.setup() is called from init.lua, before
--   VimEnter. As lua/lazy/core/loader.lua's startup does: loadplugins off,
--   the rtp saved, `init` of every plugin, then the start plugin loaded
--   (its dir added to the rtp, plugin/ of its dir sourced — the clone root
--   has none —, then `config`, or `require(main).setup(opts)`), then plugin/
--   of the saved rtp. On VimEnter it checks that every command exists and
--   that autostart started the companion (lock file), its plugin host and
--   the cross-session participant, with the library installed by the build
--   step, and that plugin/ of examples/neovim was never sourced; then the
--   vimdoc (the build step's :helptags, every tag and |link|).
-- Writes $QCNV_TMP/nv-lazy-<phase>.json ({checks = ...}) and quits.

local T = assert(os.getenv('QCNV_TMP'))
local LAZY = assert(os.getenv('QCNV_LAZY'))
local README = assert(os.getenv('QCNV_README'))
local PHASE = assert(os.getenv('QCNV_LAZY_PHASE'))
local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local check = C.check
local function finish()
  C.finish(T .. '/nv-lazy-' .. PHASE .. '.json')
end

--- The spec: the first ```lua block after "**lazy.nvim.**" in the README.
-- after_vim_enter(what, fn): runs fn once VimEnter's handlers have all run
-- (as lazy.nvim's VeryLazy does), then writes the checks; an error in fn is a
-- failed check named `what`.
local function after_vim_enter(what, fn)
  vim.api.nvim_create_autocmd('VimEnter', {
    once = true,
    callback = function()
      vim.schedule(function()
        local ok, err = pcall(fn)
        if not ok then
          check(what, false, err)
        end
        finish()
      end)
    end,
  })
end

local function read_spec()
  local text = table.concat(vim.fn.readfile(README), '\n')
  local at = assert(text:find('**lazy.nvim.**', 1, true), 'no **lazy.nvim.** in ' .. README)
  local code = assert(text:match('```lua\n(.-)\n```', at), 'no lua block after **lazy.nvim.**')
  local spec = assert(loadstring('return ' .. code, 'the README\'s lazy.nvim spec'))()
  local plugin = vim.deepcopy(spec)
  plugin.dir = LAZY
  plugin.name = spec[1]:match('[^/]+$')
  return spec, plugin
end

local function source_runtime(dir)
  local files = {}
  for _, ext in ipairs({ 'lua', 'vim' }) do
    vim.list_extend(files, vim.fn.glob(dir .. '/**/*.' .. ext, true, true))
  end
  table.sort(files)
  for _, f in ipairs(files) do
    vim.cmd('source ' .. vim.fn.fnameescape(f))
  end
  return files
end

local ALL = {
  'QwenStart', 'QwenStop', 'QwenStatus', 'QwenRun', 'QwenEnv', 'QwenDiffAccept', 'QwenDiffReject', 'QwenInstall',
  'QwenPlugin', 'QwenSessions', 'QwenSend', 'QwenSendQuickfix', 'QwenMessages', 'QwenHeld', 'QwenInboxPolicy',
  'QwenToggle', 'QwenAdd', 'GeminiToggle', 'GeminiRun',
}

local function build_phase()
  local spec, plugin = read_spec()
  check('the spec builds with a .lua file of the plugin (lazy.nvim runs it as Lua)',
    type(spec.build) == 'string' and spec.build:match('%.lua$') ~= nil, spec.build)
  check('the plugin is not on the runtimepath while building', #vim.api.nvim_get_runtime_file('lua/qwen_companion/init.lua', true) == 0)
  -- lazy.async, as far as a build file uses it
  local log, task, co = {}, nil, nil
  local function step()
    if coroutine.status(co) ~= 'suspended' or task.suspended then
      return
    end
    local ok, res = coroutine.resume(co)
    if not ok then
      log[#log + 1] = 'ERROR ' .. tostring(res)
    elseif res then
      log[#log + 1] = tostring(res)
    end
    if coroutine.status(co) ~= 'dead' and not task.suspended then
      vim.schedule(step)
    end
  end
  task = {
    suspended = false,
    suspend = function(self)
      self.suspended = true
      coroutine.yield()
    end,
    resume = function(self)
      self.suspended = false
      vim.schedule(step)
    end,
  }
  package.loaded['lazy.async'] = {
    running = function()
      return coroutine.running() == co and task or nil
    end,
  }
  co = coroutine.create(function()
    local chunk = assert(loadfile(plugin.dir .. '/' .. spec.build))
    chunk()
  end)
  step()
  vim.wait(120000, function()
    return coroutine.status(co) == 'dead'
  end, 20)
  check('the build task ended', coroutine.status(co) == 'dead', log)
  local errs = vim.tbl_filter(function(l)
    return l:match('^ERROR')
  end, log)
  check('... without an error', #errs == 0, log)
  local lib = LAZY .. '/examples/neovim/lib/'
  check('... it installed the library and the bridge in examples/neovim/lib/',
    vim.fn.filereadable(lib .. 'libqwen_companion.so') == 1 and vim.fn.executable(lib .. 'qc-mcp-bridge') == 1,
    vim.fn.glob(lib .. '*', true, true))
  local has = function(needle)
    for _, l in ipairs(log) do
      if l:find(needle, 1, true) then
        return true
      end
    end
    return false
  end
  check('... with its progress in the task log (downloading, checking, installed version)',
    has('downloading qwen-companion-') and has('checking the library') and has('qwen-companion: installed version '), log)
  check('... and wrote the help tags', vim.fn.filereadable(LAZY .. '/examples/neovim/doc/tags') == 1)
  finish()
end

local function start_phase()
  local spec, plugin = read_spec()
  vim.go.loadplugins = false -- lazy.nvim's setup
  local rtp = vim.opt.rtp:get()
  if plugin.init then
    plugin.init(plugin)
  end
  -- load the start plugin (Loader._load)
  vim.opt.rtp:append(plugin.dir)
  local sourced = source_runtime(plugin.dir .. '/plugin')
  check('lazy.nvim sources plugin/ of the clone root: there is none', #sourced == 0, sourced)
  local cok, cerr = pcall(function()
    if type(plugin.config) == 'function' then
      plugin.config(plugin, plugin.opts)
    else
      assert(plugin.main, 'no config function and no main')
      require(plugin.main).setup(plugin.opts)
    end
  end)
  check('config (require(main).setup(opts)) runs before VimEnter', cok and vim.v.vim_did_enter == 0, cerr)
  check('... and arms autostart for VimEnter (nothing started yet)', package.loaded['qwen_companion'] and require('qwen_companion').status() == nil)
  for _, path in ipairs(rtp) do -- plugin/ of the saved rtp (e.g. $VIMRUNTIME's)
    if not path:find('after/?$') then
      source_runtime(path .. '/plugin')
    end
  end

  after_vim_enter('the VimEnter checks ran', function() -- after every VimEnter handler (setup's ran first)
    check('plugin/ of examples/neovim was never sourced', vim.g.loaded_qwen_companion == nil)
    local missing = {}
    for _, c in ipairs(ALL) do
      if vim.fn.exists(':' .. c) ~= 2 then
        missing[#missing + 1] = c
      end
    end
    check('every command exists (' .. #ALL .. ': core, :QwenInstall, plugins, sessions)', #missing == 0, missing)
    local qc = require('qwen_companion')
    local s = qc.status()
    check('autostart started the companion on VimEnter', s ~= nil)
    check('... its lock file exists', s and s.lock_file and vim.fn.filereadable(s.lock_file) == 1, s and s.lock_file)
    check('... with the plugin host and its MCP server', s and s.plugins.running and s.plugins.mcp ~= nil, s and s.plugins)
    local p = require('qwen_companion.participant').status()
    check('... and the cross-session participant joined', p ~= nil and p.name ~= nil, p)
    local capi = require('qwen_companion.capi')
    local path, origin = capi.library_path()
    check('the library is the one the build step installed (examples/neovim/lib)',
      path == LAZY .. '/examples/neovim/lib/' .. capi.library_file_name() and origin == 'next to the plugin', { path, origin })

    -- the vimdoc: every tag works with :help, every |link| resolves
    local dir = LAZY .. '/examples/neovim'
    local doc = table.concat(vim.fn.readfile(dir .. '/doc/qwen_companion.txt'), '\n')
    local defined, links = {}, {}
    for tag in doc:gmatch('%*([%w_.:%-()]+)%*') do
      defined[#defined + 1] = tag
    end
    for link in doc:gmatch('|([^|%s]+)|') do
      links[link] = true
    end
    check('the vimdoc defines its tags', #defined >= 15, defined)
    local bad = {}
    for _, tag in ipairs(defined) do
      if not pcall(vim.cmd, 'help ' .. tag) then
        bad[#bad + 1] = tag
      end
    end
    for link in pairs(links) do
      if not pcall(vim.cmd, 'help ' .. link) then
        bad[#bad + 1] = '|' .. link .. '|'
      end
    end
    pcall(vim.cmd, 'helpclose')
    check(':help finds every tag and every |link| of the vimdoc', #bad == 0, bad)
    qc.stop({ silent = true })
    check('the lock file is gone after :QwenStop', s and vim.fn.filereadable(s.lock_file) == 0)
  end)
end

-- QCNV_LAZY_PHASE=packpath (nvim --headless -u test_lazy.lua, plugins
-- loaded): the plugin folder on the runtimepath and setup{ autostart } in
-- the init file, then Neovim sources plugin/qwen_companion.lua too. Both
-- define everything: the companion and the participant start once.
local function packpath_phase()
  local dir = LAZY .. '/examples/neovim'
  vim.opt.rtp:prepend(dir)
  local part = require('qwen_companion.participant')
  local starts, real_start = 0, part.start
  part.start = function(...)
    starts = starts + 1
    return real_start(...)
  end
  local qc = require('qwen_companion')
  local companions = 0
  qc.on_start(function()
    companions = companions + 1
  end)
  qc.setup({ autostart = true })
  after_vim_enter('the VimEnter checks ran', function()
    check('plugin/qwen_companion.lua was sourced after setup()', vim.g.loaded_qwen_companion == 1)
    local missing = vim.tbl_filter(function(c)
      return vim.fn.exists(':' .. c) ~= 2
    end, ALL)
    check('every command exists', #missing == 0, missing)
    check('the companion started once', qc.status() ~= nil and companions == 1, companions)
    check('the participant started once (its hook added once)', starts == 1, starts)
    qc.stop({ silent = true })
    check('... and stopped', qc.status() == nil and part.status() == nil)
  end)
end

-- QCNV_LAZY_PHASE=late (nvim --headless -u test_lazy.lua --noplugin): the
-- spec with `event = 'VeryLazy'`: lazy.nvim runs `init` at startup and
-- loads the plugin after VimEnter (VeryLazy is a User event lazy.nvim fires
-- then). setup() must start the companion at once.
local function late_phase()
  local _, plugin = read_spec()
  vim.go.loadplugins = false
  if plugin.init then
    plugin.init(plugin)
  end
  after_vim_enter('the VeryLazy load ran', function() -- lazy.nvim: VeryLazy after VimEnter
    vim.opt.rtp:append(plugin.dir)
    source_runtime(plugin.dir .. '/plugin')
    require(plugin.main).setup(plugin.opts)
    local qc = require('qwen_companion')
    local s = qc.status()
    check('loaded after VimEnter: setup() started the companion at once', s ~= nil and vim.fn.filereadable(s.lock_file) == 1, s)
    local missing = vim.tbl_filter(function(c)
      return vim.fn.exists(':' .. c) ~= 2
    end, ALL)
    check('... and defined every command', #missing == 0, missing)
    check('... and the participant joined', require('qwen_companion.participant').status() ~= nil)
    qc.stop({ silent = true })
  end)
end

local phases = { build = build_phase, start = start_phase, packpath = packpath_phase, late = late_phase }
local ok, err = pcall(assert(phases[PHASE], 'unknown QCNV_LAZY_PHASE'))
if not ok then
  check('test_lazy.lua (' .. PHASE .. ') ran', false, err)
  finish()
end
