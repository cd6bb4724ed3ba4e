// model_key.cpp: a model's key by its shape (model_key.hpp).
#include "model_key.hpp"

namespace headroom::calibrate {

namespace {

// The shape part of the key as calibration files held it after the model's name before the key dropped the
// name: "L32 h4096 a32 f14336 v128256".
std::string legacy_shape_key(const model_spec& m) {
  return "L" + std::to_string(m.layers) + " h" + std::to_string(m.hidden) + " a" + std::to_string(m.heads) +
         " f" + std::to_string(m.ffn_hidden) + " v" + std::to_string(m.vocab);
}

}  // namespace

std::string implementation_key(const model_spec& m) {
  std::string k = legacy_shape_key(m) + " kv" + std::to_string(m.kv_heads) + " d" + std::to_string(m.head_dim) +
                  " " + to_string(m.mlp) + " " + to_string(m.norm) + (m.tied_embeddings ? " tied" : "") +
                  (m.qk_norm ? " qknorm" : "");
  if (m.moe.enabled()) {
    std::string layers;
    for (const bool b : m.moe.layers) layers += b ? '1' : '0';
    k += " E" + std::to_string(m.moe.experts) + " k" + std::to_string(m.moe.top_k) + " fe" +
         std::to_string(m.moe.expert_ffn) + " fs" + std::to_string(m.moe.shared_ffn) + " mtp" +
         std::to_string(m.moe.mtp_layers) + " moe" + layers;
  }
  if (m.mla.enabled())
    k += " mla" + std::to_string(m.mla.q_lora_rank) + "/" + std::to_string(m.mla.kv_lora_rank) + "/" +
         std::to_string(m.mla.qk_nope_head_dim) + "/" + std::to_string(m.mla.qk_rope_head_dim) + "/" +
         std::to_string(m.mla.v_head_dim);
  return k;
}

bool same_implementation(const std::string& stored, const model_spec& m) {
  if (stored == implementation_key(m)) return true;
  const std::string legacy = " " + legacy_shape_key(m);
  return stored.size() > legacy.size() && stored.compare(stored.size() - legacy.size(), legacy.size(), legacy) == 0;
}

}  // namespace headroom::calibrate
