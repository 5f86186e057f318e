/* table.c: the table of op modules (src/ops/module.h, docs/design.md): adding an op adds its module here. */
#include "ops/modkit.h"

/* Every op module; an op is added by adding its module here (docs/design.md). */
const er_op_module *const er__modules[] = {&er__matmul_module, &er__sum_module,       &er__mean_module,
                                           &er__max_module,    &er__softmax_module,   &er__log_softmax_module,
                                           &er__rmsnorm_module, &er__layernorm_module, &er__chain_module,
                                           &er__tensor_module, &er__quantize_module,  &er__attention_module,
                                           &er__softmax_backward_module, &er__log_softmax_backward_module,
                                           &er__layer_norm_backward_module, &er__rmsnorm_backward_module,
                                           &er__cross_entropy_module, &er__attention_backward_module,
                                           &er__attention_fp8_module,
                                           NULL};

