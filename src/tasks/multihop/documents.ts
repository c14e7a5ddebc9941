/** One short document per entity; every fact a question needs is stated in plain words. */
import type { SearchDocument } from "../../data/documents.js";
import type { Entity, World } from "./world.js";

export function entityText(e: Entity): string {
  switch (e.kind) {
    case "river":
      return `${e.name} is a river in ${e.country}. It is ${e.length} km long.`;
    case "city":
      return `${e.name} is a city in ${e.country}, on the ${e.river} river. It was founded in ${e.founded} and has ${e.population} people.`;
    case "person":
      return `${e.name} is ${/^[aeiou]/.test(e.occupation) ? "an" : "a"} ${e.occupation} born in ${e.birthplace} in ${e.born}.`;
    case "company":
      return `${e.name} is a company founded in ${e.founded} by ${e.founder}. It is based in ${e.hq}.`;
  }
}

/** Documents of every entity of every split (all are searchable), id = title = the entity's name. */
export function worldDocuments(world: World): SearchDocument[] {
  return [...world.byName.values()].map((e) => ({ id: e.name, title: e.name, text: entityText(e) }));
}
