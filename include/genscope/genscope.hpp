// genscope: the umbrella header of the public C++ API.
#pragma once

#include "genscope/dtype.hpp"
#include "genscope/error.hpp"
#include "genscope/host.hpp"
#include "genscope/metric.hpp"
#include "genscope/monitor.hpp"
#include "genscope/probe.hpp"
#include "genscope/report.hpp"
#include "genscope/run.hpp"
#include "genscope/run_json.hpp"
#include "genscope/safetensors.hpp"
#include "genscope/sink.hpp"
#include "genscope/step.hpp"
#include "genscope/step_kind.hpp"
#include "genscope/tensor_view.hpp"
#include "genscope/version.hpp"
#include "genscope/watch.hpp"
