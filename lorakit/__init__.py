"""LoRA and QLoRA fine-tuning, written as notebooks: `from lorakit import add_lora, finetune`.

The names of `__all__` are imported from their modules on first use, so `import lorakit` loads
no torch. Each is found in `lorakit/_modidx.py`, the index `nbdev-export` writes, so a name that
moves to another module is found there. `lorakit.train` and `lorakit.finetune` are the functions;
their modules are reached by path: `from lorakit.train import fit`."""
__version__ = "0.0.1"

import sys as _sys
from functools import cache as _cache
from importlib import import_module as _import_module
from types import ModuleType as _ModuleType

__all__ = ['set_seed', 'add_lora', 'lora_summary', 'merge_lora', 'unload_lora',
           'QuantSpec', 'quantize_base', 'merge_to_16bit',
           'load_llama', 'load_tokenizer', 'generate',
           'TrainConfig', 'fit', 'train', 'finetune',
           'save_adapter', 'load_adapter', 'merge_adapter', 'export_gguf', 'write_lora_gguf',
           'estimate_memory']

@_cache
def _homes()->dict[str, str]:
    "Each name of `__all__` -> the module that defines it, read from nbdev's index."
    from ._modidx import d
    found = {}
    for syms in d['syms'].values():
        for sym in syms:
            _, mod, *name = sym.split('.')  # 'lorakit.inject.add_lora'; a method has two names
            if len(name) == 1 and name[0] in __all__: found.setdefault(name[0], []).append(mod)
    bad = {n: found.get(n, []) for n in __all__ if len(found.get(n, [])) != 1}
    if bad: raise ImportError(f"each name of lorakit.__all__ needs one module in _modidx.py,"
                              f" not {bad}: run nbdev-export, or rename one")
    return {n: ms[0] for n, ms in found.items()}

def __getattr__(name:str):
    if name not in __all__: raise AttributeError(f"module 'lorakit' has no attribute {name!r}")
    obj = getattr(_import_module(f'lorakit.{_homes()[name]}'), name)
    globals()[name] = obj  # the next lookup is a plain attribute
    return obj

def __dir__()->list[str]: return sorted(set(globals()) | set(__all__))

class _Package(_ModuleType):
    "The package, whose `train` and `finetune` stay the functions when their modules load."
    def __setattr__(self, name:str, value):
        # importing the module `lorakit.train` would otherwise bind it over the function `train`
        if name in __all__ and isinstance(value, _ModuleType): return
        super().__setattr__(name, value)

_sys.modules[__name__].__class__ = _Package
