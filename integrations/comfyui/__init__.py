"""genscope inside ComfyUI: every prompt a genscope run, every node a step (docs/comfyui.md).

Install into ComfyUI/custom_nodes/genscope_comfyui (`genscope comfyui install COMFYUI_DIR`);
the folder must not be called `genscope`: ComfyUI imports a custom node package under its
folder name, which would hide the genscope module itself.

Loading never stops ComfyUI from starting: without the genscope module, or in a ComfyUI this
package does not understand, it logs one line and does nothing.
"""

import logging

NODE_CLASS_MAPPINGS = {}
NODE_DISPLAY_NAME_MAPPINGS = {}

PLUGIN = None
try:
    from .plugin import Unavailable as _Unavailable
    from .plugin import setup as _setup

    try:
        PLUGIN = _setup()
    except _Unavailable as _e:
        logging.getLogger("genscope.comfyui").warning("genscope: not monitoring: %s", _e)
except Exception as _e:  # whatever happens, ComfyUI goes on starting
    logging.getLogger("genscope.comfyui").warning(
        "genscope: not monitoring: setup failed: %s: %s", type(_e).__name__, _e)

# The frontend extension (web/genscope.js: the figures on the graph, the runs panel), served by
# ComfyUI at /extensions/<folder>/ only while the package monitors (it reads /genscope/...).
WEB_DIRECTORY = "./web" if PLUGIN is not None else None
