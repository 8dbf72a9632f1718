import os

import jax

# A silent (T, B) vs (T, B, 1) broadcast is an error in the tests.
jax.config.update("jax_numpy_rank_promotion", "raise")

# The command line caches compiled programs in ~/.cache/rollax/jax by default: the tests run it
# in-process with the cache off (tests/test_compile_cache.py turns it on in a temporary folder).
os.environ["ROLLAX_COMPILE_CACHE"] = "off"
