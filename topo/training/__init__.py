"""Training jobs on the fabric: a model + a parallel layout -> one step's compute, communication, memory, MFU.

One idea per module: :mod:`.model` (model files), :mod:`.parallel` (the parallel layout and its checks),
:mod:`.mapping` (dimensions onto GPU ids, group matrices), :mod:`.flops` (FLOP counts and conventions),
:mod:`.gpus` (peaks and achievable efficiency per generation), :mod:`.memory` (memory per GPU),
:mod:`.comm` (the only door to the collective engine, cached), :mod:`.step` (one step's time),
:mod:`.tier_bytes` (the step's bytes per tier), :mod:`.search` (ranking layouts), :mod:`.result` (result types).
"""
