-- lazy.nvim's build step for qwen-companion (the spec's
-- `build = 'examples/neovim/build.lua'`; lazy.nvim runs a build string
-- ending in .lua as a Lua file of the plugin). It installs the prebuilt
-- library and qc-mcp-bridge of this platform into lib/ of this folder, or
-- builds them from source when vim.g.qwen_companion_build or
-- $QWEN_COMPANION_BUILD is 'source'. See :help qwen_companion-install.
local dir = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:gsub('^@', ''), ':p:h')
vim.opt.rtp:append(dir)
require('qwen_companion.install').build()
