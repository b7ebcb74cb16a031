# Sourced by the bench scripts: the paths they share and the suite's graphs (issue 3's list).
#   SPGNN=build/spgnn  DATA_DIR=../shared/data (else .data)  GRAPHS_DIR=/tmp/spgnn-graphs
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPGNN="${SPGNN:-$ROOT/build/spgnn}"
DATA_DIR="${DATA_DIR:-$ROOT/../shared/data}"
[ -d "$DATA_DIR" ] || DATA_DIR="$ROOT/.data"
GRAPHS_DIR="${GRAPHS_DIR:-/tmp/spgnn-graphs}"
mkdir -p "$GRAPHS_DIR"

# Suite name -> graph spec (anything else is passed through as a path or spec).
#   kron21   Kronecker/R-MAT scale 21, edge factor 16 (Graph500 a=.57 b=c=.19)
#   kron21sym  kron21 with the reverse of every edge added (issue 12's fourth large graph)
#   reddit   uniform random graph shaped like Reddit: 232,965 vertices, ~114M edges
#   products R-MAT shaped like ogbn-products: 2^21 vertices, ~124M raw edges (edge factor 59)
#   cora, citeseer, pubmed  the graphs in $DATA_DIR
suite_spec() {
  case "$1" in
    kron21) echo "rmat:21:16:1" ;;
    kron21sym) echo "rmat:21:16:1:sym" ;;
    reddit) echo "er:232965:489:1" ;;
    products) echo "rmat:21:59:2" ;;
    cora|citeseer) echo "$DATA_DIR/$1" ;;
    pubmed) echo "$DATA_DIR/pubmed-graph" ;;
    amazon) echo "$DATA_DIR/amazon-computers" ;;
    coauthor) echo "$DATA_DIR/coauthor-cs" ;;
    notredame) echo "$DATA_DIR/web-notredame/web-NotreDame.txt.gz" ;;  # directed (SNAP text)
    *) echo "$1" ;;
  esac
}

# Suite name, spec or path -> a label for file names and tables: a path's base name without its
# extension, a spec with ':' as '_' (a path given as a graph must not put '/' into a result's name).
suite_label() {
  local s=$1
  case "$s" in */*) s=$(basename "$s"); s=${s%%.*} ;; esac
  echo "${s//[:\/ ]/_}"
}

# Suite name or spec -> a readable graph file: rmat/er specs are generated once into
# $GRAPHS_DIR/<name>.spg (progress on stderr); other paths must exist. Returns 1 otherwise.
suite_graph() {
  local name=$1 spec file kind rest sc ef sd n deg
  spec=$(suite_spec "$name")
  case "$spec" in
    rmat:*|er:*)
      file="$GRAPHS_DIR/$(suite_label "$name").spg"
      if [ ! -f "$file" ]; then
        kind=${spec%%:*}; rest=${spec#*:}
        if [ "$kind" = rmat ]; then
          IFS=: read -r sc ef sd sym <<<"$rest"
          local sym_flag=()
          [ "${sym:-}" = sym ] && sym_flag=(--symmetrize)
          "$SPGNN" generate rmat --scale "$sc" --edge-factor "${ef:-16}" --seed "${sd:-1}" \
            "${sym_flag[@]}" -o "$file" >&2 || return 1
        else
          IFS=: read -r n deg sd <<<"$rest"
          "$SPGNN" generate er --n "$n" --avg-degree "$deg" --seed "${sd:-1}" -o "$file" >&2 || return 1
        fi
      fi
      echo "$file" ;;
    *) [ -e "$spec" ] || return 1; echo "$spec" ;;
  esac
}
