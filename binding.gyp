{
  "variables": {
    "system_blas%": "<!(node scripts/detect-blas.js)"
  },
  "targets": [
    {
      "target_name": "agent_r1_native",
      "sources": [
        "native/agent_r1_native.c",
        "native/gemm.c",
        "native/blas.c",
        "native/gemm_x86.c",
        "native/gemm_avx2.c",
        "native/gemm_amx.c",
        "native/gemm_bf16dot.c",
        "native/kernel_bindings.c",
        "native/kernels/optim.c",
        "native/napi_args.c",
        "native/parallel.c",
        "native/kernels/logprob_rows.c",
        "native/kernels/draw_rows.c",
        "native/model/layers.c",
        "native/model/lora_drop.c",
        "native/model/decoder.c",
        "native/model/chains.c",
        "native/model/scratch.c",
        "native/model/model_create.c",
        "native/model/model_napi.c"
      ],
      "cflags": ["-O3", "-std=c99", "-fno-trapping-math", "-fno-math-errno", "-Wall", "-Wextra", "-pthread"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["system_blas=='accelerate'", {
          "defines": ["AGENT_R1_SYSTEM_BLAS=\"Accelerate\""],
          "libraries": ["-framework Accelerate"],
          "xcode_settings": { "OTHER_CFLAGS": ["-O3"] }
        }],
        ["system_blas=='openblas'", {
          "defines": ["AGENT_R1_SYSTEM_BLAS=\"OpenBLAS\"", "AGENT_R1_OPENBLAS"],
          "libraries": ["-lopenblas"]
        }]
      ]
    }
  ]
}
