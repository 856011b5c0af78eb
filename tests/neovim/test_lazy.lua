-- The lazy.nvim layout (tests/neovim/run.sh): $QCNV_LAZY is a copy of the
-- repository as lazy.nvim clones it (the plugin in examples/neovim, the
-- library built in target/release). This runs what the documented spec's
-- `config` does — rtp append, :helptags, setup() — in a Neovim started
-- without the plugin on the runtimepath, then checks that the commands
-- exist, the library is found there without configuration, the help tags
-- work, every |link| of the vimdoc resolves, and the companion starts.
-- Writes $QCNV_TMP/nv-lazy.json ({checks = ...}) and quits.

local T = assert(os.getenv('QCNV_TMP'))
local LAZY = assert(os.getenv('QCNV_LAZY'))
local checks = {}
local function check(name, ok, detail)
  checks[#checks + 1] = { name, ok and true or false, detail ~= nil and vim.inspect(detail) or '' }
end

local function finish()
  local f = assert(io.open(T .. '/nv-lazy.json', 'w'))
  f:write(vim.fn.json_encode({ checks = checks }))
  f:close()
  vim.cmd('qall!')
end

local ok, err = pcall(function()
  -- the spec's config function, as doc/qwen_companion.txt gives it
  local plugin = { dir = LAZY }
  local dir = plugin.dir .. '/examples/neovim'
  vim.opt.rtp:append(dir)
  local hok, herr = pcall(vim.cmd, 'helptags ' .. vim.fn.fnameescape(dir .. '/doc'))
  check(':helptags on the doc folder succeeds', hok, herr)
  require('qwen_companion').setup({ lock_dir = T .. '/lazy-locks' })

  for _, c in ipairs({ 'QwenStart', 'QwenStop', 'QwenStatus', 'QwenRun', 'QwenDiffAccept', 'QwenDiffReject' }) do
    check('setup() defined :' .. c .. ' (plugin/ not sourced)', vim.fn.exists(':' .. c) == 2)
  end
  local capi = require('qwen_companion.capi')
  local path, origin = capi.library_path()
  check('the library is found in the clone\'s target/release', origin == 'next to the plugin'
    and path == LAZY .. '/target/release/' .. capi.library_file_name(), { path, origin })

  -- every tag the vimdoc defines works with :help, and every |link| resolves
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
  vim.cmd('helpclose')
  check(':help finds every tag and every |link| of the vimdoc', #bad == 0, bad)

  local qc = require('qwen_companion')
  local sok, serr = qc.start()
  check('the companion starts from the lazy layout', sok, serr)
  local s = qc.status()
  check('... with its plugin host and MCP server', s and s.plugins.running and s.plugins.mcp ~= nil, s and s.plugins)
  qc.stop({ silent = true })
end)
if not ok then
  check('test_lazy.lua ran', false, err)
end
finish()
