/** A searchable document: what the search tool indexes and returns (BeIR corpus shape, `_id` renamed `id`). */
export interface SearchDocument {
  id: string;
  title: string;
  text: string;
}
