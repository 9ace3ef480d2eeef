"""What the code that picks or lists the backends of the build compiles with."""

# PS_WITH_CUDA in a --config=cuda build (//worker/compute:cuda).
WITH_CUDA_DEFINES = select({
    "//worker/compute:cuda": ["PS_WITH_CUDA"],
    "//conditions:default": [],
})
