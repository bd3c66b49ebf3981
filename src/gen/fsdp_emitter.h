// The emitter of a model program (model_program.h): it runs the program as autograd does: the
// forward's activations and saves, the backward as the forward program run in reverse (backward
// spans, each parameter's gradient at the backward of the ops that read it (param_reads; without
// them, a unit's full gradients at the first op that uses it), a flat parameter's view gradients
// concatenated), checkpoint recomputation. Everything about the parameters (shards, gathers,
// reshards, prefetch, the reduction of a unit's gradients, the optimizer state) is the FSDP
// implementation's (fsdp_implementation.h: fairscale's, PyTorch's FSDP1 or FSDP2). Presets only
// describe their model; the emitter and the implementations are the one place the FSDP allocation
// pattern lives.
#pragma once

#include "core/event_sink.h"
#include "core/status.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"

namespace bucketsim {

// Emits the header and every event of `options.iterations` iterations into `sink`.
Status EmitFsdpTrace(const ModelProgram& model, const GenOptions& options, EventSink& sink);

}  // namespace bucketsim
